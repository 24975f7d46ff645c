// Package jsonids writes arrays of token IDs as JSON text, byte for byte as
// encoding/json writes a non-empty []uint32 ("[1,2,3]"), and reads them
// (Parse), without reflection.
//
// A prompt of 2,000 tokens becomes about 12 KB of digits and commas, and on
// the tokenize-once path it is written by the engine's render route (its
// response's token_ids) and forwarded by the gateway in the completions
// body's prompt: the gateway copies the renderer's bytes when they are
// exactly what this package writes (render.Prompt.AppendTokenJSON), and
// writes the IDs with this package otherwise. encoding/json spends most of
// that time in its reflective slice encoder and strconv spends it dividing
// by ten; this package sizes the output exactly (Len) and writes two digits
// per division. Lists are read by List (the render client's token_ids, the
// simulated engine's token-in prompt) and Parse (a whole JSON value): the
// list is sized once, from its commas, and each ID is read eight bytes at
// a time (Number), about twice as fast as a digit-by-digit loop
// (BenchmarkNumber's x-loop). ParseLax (the gateway's token-in route) is
// Parse reading a list Parse refuses again as vLLM's pydantic model reads
// it: 1.0 and "1" are the ID 1.
package jsonids
