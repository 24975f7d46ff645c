// Package jsonexact decodes JSON into Go values the way vLLM and SGLang
// read it (Python's json.loads, then a pydantic model or dict lookups):
// an object's member matches a struct field only by its exact name, and of
// a repeated name only the last member counts.
//
// encoding/json matches member names to struct fields case-insensitively
// ("Messages" fills the messages field) and decodes a repeated member into
// the value the first one left, merging objects and maps and reusing a
// list's elements. A client body whose "System" or second "messages" the
// engine ignores would then be read by kvroute as something the engine
// never sees, and routed by block keys the engine never computes.
// Unmarshal first rewrites the input into the members such a reader sees,
// then lets encoding/json decode that.
//
// It is for readers off the hottest paths (a body translated for an
// older renderer, a session's opening, an engine's answer): it copies the
// input once. Hot readers find their members with jsonscan.Members and
// decode each value by hand.
package jsonexact
