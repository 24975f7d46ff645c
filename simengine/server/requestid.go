package server

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// Request ids, as vLLM's OpenAI server builds them.
//
// A generating route's response id is its prefix and a base id
// (OpenAIServing._base_request_id): the request's X-Request-Id header (its
// first value, even empty) when it has one, else the body's request_id
// when set, else a generated one. /v1/completions ("cmpl-"),
// /v1/chat/completions ("chatcmpl-") and the token-in route
// ("generate-tokens-") read both; /v1/messages, served by vLLM through its
// chat completions, answers with that chat completion's id ("chatcmpl-"
// and the header's value); /v1/responses reads only its body's
// request_id, the whole id (vLLM's default is "resp_" and a uuid). The
// render routes' ids are always generated.
//
// With Config.EnableRequestIDHeaders (vLLM's --enable-request-id-headers
// middleware) every response, whatever its route and status, carries
// X-Request-Id: the request's, or a random uuid4 in hex.

// headerRequestID is the header vLLM reads a request's id from.
const headerRequestID = "X-Request-Id"

// responseID returns a generating route's response id: prefix and the
// request's X-Request-Id, else prefix and body (the body's request_id),
// else a generated id.
func (s *Server) responseID(r *http.Request, prefix, body string) string {
	if vs, ok := r.Header[headerRequestID]; ok && len(vs) > 0 {
		return prefix + vs[0]
	}
	if body != "" {
		return prefix + body
	}
	return s.requestID(prefix)
}

// echoRequestID sets the response's X-Request-Id as vLLM's
// XRequestIdMiddleware does: the request's first value, or a random uuid4
// in hex.
func echoRequestID(w http.ResponseWriter, r *http.Request) {
	id := ""
	if vs, ok := r.Header[headerRequestID]; ok && len(vs) > 0 {
		id = vs[0]
	} else {
		id = uuid4Hex()
	}
	w.Header()[headerRequestID] = []string{id}
}

// uuid4Hex returns a random version-4 UUID as 32 hex digits (Python's
// uuid.uuid4().hex).
func uuid4Hex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
