// Package jsonstr finds the end of a JSON string in a byte slice and
// validates it as encoding/json does, without decoding it. The render
// client's response and request scanners and the gateway's body scanner
// share it, so that both skip prompt text at the same speed.
//
// A string scan has to stop at three kinds of byte: the closing quote, a
// backslash (an escape, whose next byte decides its length) and a control
// byte below 0x20 (forbidden unescaped). StringEnd looks for all three at
// once, eight bytes per machine word, 32 bytes per step: prompts are long
// and mostly escape-free, but chat transcripts and code are dense with \n
// and \" escapes, and a scan that searches for the closing quote first
// (memchr) rescans the rest of the string after every escape, which is
// quadratic on such prompts. One pass over words costs the same per byte
// on both shapes.
package jsonstr
