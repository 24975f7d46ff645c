// Package jsonscan is the lexical half of kvroute's hand-written JSON
// readers: a Scanner over a byte slice that skips whitespace, matches
// punctuation and literals, finds the end of a string (through
// internal/jsonstr), validates numbers with JSON's grammar and skips a whole
// value with a nesting limit, all without building values and without
// panicking on malformed input. Every error is a *SyntaxError that names the
// byte offset where the input went wrong.
//
// The render client (reading vLLM render responses and request bodies) and
// the gateway (finding a request body's top-level "model") both
// read JSON on every request and build only what they need; each keeps its
// own grammar (which fields it reads, what it does with them, its messages)
// and uses this package for the lexical work, so that both accept exactly
// what encoding/json accepts and fixes land in one place.
//
// Members reads an object's members the way vLLM and SGLang read them
// (Python's json.loads, then a pydantic model): by exact name, the last of
// a repeated name winning. A reader that decodes a client body or an
// engine's answer with encoding/json struct tags would match names
// case-insensitively and merge repeated objects; such a reader finds its
// members with Members and decodes each value alone.
//
// PythonJSON reads a client body's bytes as vLLM and SGLang read them
// (Python's json.loads): a UTF-16 or UTF-32 body decoded to UTF-8, its
// copy announced to the caller's memory budget before it is made, and a
// UTF-8 body read past one leading byte order mark. Every host of kvroute
// that reads a client body reads it through PythonJSON first.
//
// The Scanner's fields are exported so that a caller's grammar can read
// spans of Buf and move Pos directly (a token list, for instance, is
// faster to parse by hand than through method calls); the small methods
// (WS, Consume, Peek, Literal, Digits) are meant to be inlined.
package jsonscan
