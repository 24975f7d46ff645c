package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvroute/kvroute/internal/jsonexact"
	"github.com/kvroute/kvroute/internal/jsonscan"
)

// Error types of vLLM's ErrorResponse.
const (
	typeNotFound   = "NotFoundError"
	typeBadRequest = "BadRequestError"
	typeInvalid    = "invalid_request_error"
	typeInternal   = "InternalServerError"
	typeConflict   = "ConflictError"
	typeUnavail    = "ServiceUnavailableError"
)

// apiError is a failed request: HTTP status plus vLLM's ErrorResponse fields.
type apiError struct {
	status  int
	typ     string
	message string
	param   *string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typeBadRequest, message: fmt.Sprintf(format, args...)}
}

func withParam(e *apiError, p string) *apiError {
	e.param = &p
	return e
}

// errorBody is vLLM's ErrorResponse.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	} `json:"error"`
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Param, b.Error.Code = e.message, e.typ, e.param, e.status
	writeJSON(w, e.status, b)
}

// writeDetail writes FastAPI's default error body, {"detail": msg}.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding failed","type":"InternalServerError","param":null,"code":500}}`)
	}
	writeBody(w, status, b)
}

// writeBody writes a whole JSON body with its Content-Length, as vLLM's
// server (Starlette's JSONResponse) does; without it, net/http would send
// any body past its 2 KB buffer chunked.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decodeJSON enforces vLLM's validate_json_request (Content-Type
// application/json), bounds the body and decodes it into v (decodeFrom).
// Unknown fields are accepted, as vLLM's OpenAI models accept (and ignore)
// extra fields.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if e := checkJSONType(r); e != nil {
		return e
	}
	return s.decodeFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), v)
}

// checkJSONType is vLLM's validate_json_request: the body must be
// application/json.
func checkJSONType(r *http.Request) *apiError {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return badRequest("Unsupported Media Type: Only 'application/json' is allowed")
	}
	return nil
}

// decodeFrom decodes one JSON value from body (bounded by the caller) into
// v, rejecting trailing data and an empty cache_salt (checkSalt). The body
// is read as vLLM reads it (Python's json.loads on its bytes): past one
// leading UTF-8 byte order mark, and a UTF-16 or UTF-32 body decoded
// (jsonscan.PythonJSON). Members are read as vLLM's request models read
// them (jsonexact): by their exact names, the last of a repeated one
// winning, so that a "Cache_Salt" or a second "prompt" changes here what it
// changes in vLLM, and in the gateway and render client that read the same
// bodies.
func (s *Server) decodeFrom(body io.Reader, v any) *apiError {
	b, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, typ: typeBadRequest,
				message: fmt.Sprintf("request body larger than %d bytes", s.cfg.MaxBodyBytes)}
		}
		return badRequest("invalid JSON body: %v", err)
	}
	if b, err = jsonscan.PythonJSON(b, nil); err != nil {
		return badRequest("invalid JSON body: %v", err)
	}
	if e := checkStreamOptions(v, b); e != nil {
		return e // a validator vLLM runs before the fields' types
	}
	if err := jsonexact.Unmarshal(b, v); err != nil {
		if e := checkRawSalt(v, b); e != nil {
			return e // vLLM checks the salt before the fields' types
		}
		return badRequest("invalid JSON body: %v", err)
	}
	return checkSalt(v)
}

// salted is a request whose model has vLLM's cache_salt.
type salted interface{ cacheSalt() *string }

// checkSalt refuses a cache_salt vLLM's request models refuse
// (validate_cache_salt, answered before the handler looks at the model):
// an empty one, one longer than maxSaltChars characters (code points, as
// Python counts them) and one holding '@', '/', '\' or NUL; a null one is
// no salt.
func checkSalt(v any) *apiError {
	if r, ok := v.(salted); ok {
		if p := r.cacheSalt(); p != nil {
			return validSalt(*p)
		}
	}
	return nil
}

// maxSaltChars is the longest cache_salt vLLM accepts, in characters.
const maxSaltChars = 128

const (
	errSaltType = "Parameter 'cache_salt' must be a non-empty string if provided."
	errSaltForm = `Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\', or NUL.`
)

func validSalt(s string) *apiError {
	if s == "" {
		return withParam(badRequest("%s", errSaltType), "cache_salt")
	}
	if utf8.RuneCountInString(s) > maxSaltChars || strings.ContainsAny(s, "@/\\\x00") {
		return withParam(badRequest("%s", errSaltForm), "cache_salt")
	}
	return nil
}

// saltMember is the member checkRawSalt reads.
var saltMember = []string{"cache_salt"}

// checkRawSalt checks the cache_salt member of body, a request of v's type
// that did not decode: vLLM validates the salt before the fields' types,
// so a salt that is not a string (nor null) is refused as not a non-empty
// string, whatever else is wrong. A body that is not a JSON object is left
// to the decoder's error.
func checkRawSalt(v any, body []byte) *apiError {
	if _, ok := v.(salted); !ok {
		return nil
	}
	var raw [1][]byte
	if jsonscan.Members(body, saltMember, raw[:]) != nil || raw[0] == nil || string(raw[0]) == "null" {
		return nil
	}
	if raw[0][0] != '"' {
		return withParam(badRequest("%s", errSaltType), "cache_salt")
	}
	s, err := jsonscan.Unquote(raw[0])
	if err != nil {
		return nil
	}
	return validSalt(s)
}

// resolveModel maps a request's model name to the engine and LoRA it
// selects. An empty name or any of the base model's served names means the
// base model, as in vLLM; an unknown one is a 404 NotFoundError.
func (s *Server) resolveModel(name string) (modelSel, *apiError) {
	if s.isBaseName(name) {
		return modelSel{eng: s.eng}, nil
	}
	if id, ok := s.loras.id(name); ok {
		return modelSel{eng: s.eng, lora: name, loraID: id}, nil
	}
	if eng, ok := s.extra[name]; ok {
		return modelSel{eng: eng}, nil
	}
	return modelSel{}, withParam(&apiError{status: http.StatusNotFound, typ: typeNotFound,
		message: fmt.Sprintf("The model `%s` does not exist.", name)}, "model")
}
