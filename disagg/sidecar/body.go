package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// JSON field names of the OpenAI request and of vLLM's KV-transfer
// parameters that the exchange reads or writes.
const (
	fieldKVTransferParams = "kv_transfer_params"
	fieldStream           = "stream"
	fieldStreamOptions    = "stream_options"
	fieldMaxTokens        = "max_tokens"
	fieldMaxCompletion    = "max_completion_tokens"
	fieldMinTokens        = "min_tokens"
	fieldMaxOutputTokens  = "max_output_tokens" // the Responses API's max_tokens
	fieldStore            = "store"             // Responses: keep the response for a later GET or previous_response_id
	fieldBackground       = "background"        // Responses: answer at once, run in the background
	fieldDoRemoteDecode   = "do_remote_decode"
	fieldDoRemotePrefill  = "do_remote_prefill"
	fieldToolChoice       = "tool_choice" // Messages: {"type":"tool"} forces a named tool (forcesNamedTool)
)

// ErrBadRequest is wrapped by every error about the client's request body
// (not a JSON object, too large): the exchange cannot run and the request
// should be answered 400 (413 for ErrTooLarge).
var ErrBadRequest = errors.New("sidecar: bad request body")

// ErrTooLarge is wrapped when a body exceeds its configured bound.
var ErrTooLarge = errors.New("sidecar: body too large")

// prefillRequestParams are the kv_transfer_params a prefiller gets: compute
// the prompt and keep the blocks for a remote decoder. The remote_* fields are
// null, as vLLM's proxies send them.
var prefillRequestParams = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

// jsonText returns a client request body as vLLM reads it
// (jsonscan.PythonJSON): FastAPI hands the body's bytes to Python's
// json.loads, which reads a UTF-8 body past one leading byte order mark and
// detects and decodes a UTF-16 or UTF-32 one (json.detect_encoding). A
// UTF-8 body is returned without its mark (sharing body's array); a wide
// one as the UTF-8 JSON it encodes, in a new array. A wide body that is not
// text in its encoding (an unpaired surrogate, a partial code unit) is an
// error wrapping ErrBadRequest that names the encoding (notText). kvroute's
// gateway and ext_proc picker read bodies the same way.
func jsonText(body []byte) ([]byte, error) {
	text, err := jsonscan.PythonJSON(body, nil)
	if err != nil {
		return nil, notText(err)
	}
	return text, nil
}

// notText is the error for a wide client body that is not text in its
// encoding, err jsonscan.PythonJSON's.
func notText(err error) error {
	return fmt.Errorf("%w: the request body is not a JSON object: %v", ErrBadRequest, err)
}

// readObject is jsonText, then parseObject: the body as vLLM reads it, and
// its members.
func readObject(body []byte) ([]byte, map[string]json.RawMessage, error) {
	text, err := jsonText(body)
	if err != nil {
		return nil, nil, err
	}
	m, err := parseObject(text)
	return text, m, err
}

// parseObject decodes a request body that must be one JSON object, keeping
// every field's raw value. body is UTF-8 (see jsonText). Whatever follows
// the object but whitespace is refused, as Python's json.loads refuses it.
// json.Unmarshal reads body where it lies: the members' raw values, which
// prefillText charges, are the only copy of it made (a json.Decoder would
// first read the whole body into a buffer of its own, a copy nothing
// charges).
func parseObject(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: the body is null, not a JSON object", ErrBadRequest)
	}
	return m, nil
}

// PrefillBody returns the body sent to the prefiller for the client request
// body orig of a completion, chat completion or Anthropic message
// (MessagesPath, whose limit is max_tokens too): the same request with
// max_tokens 1 (max_completion_tokens and min_tokens too when the client
// set them: vLLM refuses a min_tokens above max_tokens), stream false, no
// stream_options, and kv_transfer_params asking for a remote decode. Every
// other field is kept. orig is read as vLLM reads a body: past a leading
// UTF-8 byte order mark, and decoded from UTF-16 or UTF-32 (the result is
// UTF-8). A Responses request's prefill body (ResponsesPath) differs;
// Exchange.Prefill builds the one of its path.
func PrefillBody(orig []byte) ([]byte, error) {
	_, m, err := readObject(orig)
	if err != nil {
		return nil, err
	}
	return prefillBody(m, "", nil)
}

// prefillBody builds the prefill body for a request on path from the
// parsed client body, which it leaves unchanged. On ResponsesPath the one
// token is asked for with max_output_tokens, the Responses API's limit
// (vLLM's ResponsesRequest reads no max_tokens: the prefiller would
// generate a whole answer), as llm-d's sidecar does; store is false and
// background dropped, so that the prefiller answers at once and keeps no
// one-token response in its store. Every other path (MessagesPath among
// them: vLLM's AnthropicMessagesRequest requires max_tokens and reads no
// max_completion_tokens, min_tokens or stream_options, which a Messages
// body lacks) gets max_tokens 1. reserve is encodeObject's.
func prefillBody(orig map[string]json.RawMessage, path string, reserve func(n int) error) ([]byte, error) {
	m := make(map[string]json.RawMessage, len(orig)+2)
	for k, v := range orig {
		m[k] = v
	}
	if path == ResponsesPath {
		m[fieldMaxOutputTokens] = json.RawMessage(`1`)
		m[fieldStore] = json.RawMessage(`false`)
		delete(m, fieldBackground)
	} else {
		m[fieldMaxTokens] = json.RawMessage(`1`)
		if _, ok := m[fieldMaxCompletion]; ok {
			m[fieldMaxCompletion] = json.RawMessage(`1`)
		}
		if _, ok := m[fieldMinTokens]; ok {
			// 1, not 0: the one token is then never an end of sequence, and
			// the prefill ends length-capped, the state in which vLLM's KV
			// connectors hand its blocks to the decoder.
			m[fieldMinTokens] = json.RawMessage(`1`)
		}
	}
	m[fieldStream] = json.RawMessage(`false`)
	delete(m, fieldStreamOptions)
	m[fieldKVTransferParams] = prefillRequestParams
	return encodeObject(m, reserve)
}

// DecodeBody returns the body sent to the decoder: the client request orig,
// unchanged but for kv_transfer_params, set to params (the object the
// prefiller returned). orig is read as PrefillBody reads it.
func DecodeBody(orig []byte, params json.RawMessage) ([]byte, error) {
	_, m, err := readObject(orig)
	if err != nil {
		return nil, err
	}
	return decodeBody(m, params, nil)
}

// LocalBody returns the client request orig as a decoder that prefills it
// itself must get it: without kv_transfer_params (a client's own
// do_remote_prefill would make the decoder pull KV blocks from whatever
// address the client named). orig is read as PrefillBody reads it, and
// returned as read (as is when it is UTF-8 without a byte order mark) when
// it has none.
func LocalBody(orig []byte) ([]byte, error) {
	text, m, err := readObject(orig)
	if err != nil {
		return nil, err
	}
	return localBody(m, text, nil)
}

// localBody is LocalBody on the parsed client body m (left unchanged) of
// orig; reserve is encodeObject's, and its error localBody's.
func localBody(m map[string]json.RawMessage, orig []byte, reserve func(n int) error) ([]byte, error) {
	if _, ok := m[fieldKVTransferParams]; !ok {
		return orig, nil
	}
	c := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		if k != fieldKVTransferParams {
			c[k] = v
		}
	}
	return encodeObject(c, reserve)
}

// decodeBody sets kv_transfer_params on the parsed client body and encodes
// it; reserve is encodeObject's.
func decodeBody(m map[string]json.RawMessage, params json.RawMessage, reserve func(n int) error) ([]byte, error) {
	m[fieldKVTransferParams] = params
	return encodeObject(m, reserve)
}

// encodeObject writes m as a JSON object with its keys sorted. The values
// are written as they are: each came from a successful decode (or is one
// of this package's constants, or TransferParams' compacted output), so
// json.Marshal's validation and compaction of every raw value, a second
// scan of the whole body, is skipped. reserve, unless nil, is called with
// the size of the buffer before it is allocated (and with its growth, when
// escaped keys outgrew it), and its error returned.
func encodeObject(m map[string]json.RawMessage, reserve func(n int) error) ([]byte, error) {
	keys := make([]string, 0, len(m))
	size := 2
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	size += size / 16
	if reserve != nil {
		if err := reserve(size); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(out, kb...)
		out = append(out, ':')
		v := m[k]
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		out = append(out, v...)
	}
	out = append(out, '}')
	if grown := cap(out) - size; grown > 0 && reserve != nil {
		// Keys whose escapes outgrew the estimate: the buffer grew as
		// it was written, and what it holds is charged all the same.
		if err := reserve(grown); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// transferParamsMember is the member of a prefiller's answer TransferParams
// reads.
var transferParamsMember = []string{fieldKVTransferParams}

// TransferParams extracts kv_transfer_params from a prefiller's
// non-streaming response: it must be a JSON object whose do_remote_prefill
// is true (what a vLLM prefiller with a KV connector answers). The object is
// returned compacted, with every field the prefiller set, so connectors'
// fields the sidecar does not know travel to the decoder untouched.
func TransferParams(resp []byte) (json.RawMessage, error) {
	// Found by its exact name, the last one when repeated, as vLLM's
	// proxies read the answer (a dict lookup), not case-insensitively as
	// encoding/json would match a struct field.
	var r [1][]byte
	if err := jsonscan.Members(resp, transferParamsMember, r[:]); err != nil {
		return nil, fmt.Errorf("prefiller response is not a JSON object: %w", err)
	}
	params := r[0]
	if len(params) == 0 || string(params) == "null" {
		return nil, errors.New("prefiller response has no kv_transfer_params (is its KV connector configured?)")
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil || p == nil {
		return nil, errors.New("prefiller kv_transfer_params is not a JSON object")
	}
	var remote bool
	if raw, ok := p[fieldDoRemotePrefill]; !ok || json.Unmarshal(raw, &remote) != nil || !remote {
		return nil, errors.New("prefiller kv_transfer_params lacks do_remote_prefill: true")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, params); err != nil {
		return nil, fmt.Errorf("prefiller kv_transfer_params: %w", err)
	}
	return b.Bytes(), nil
}

// forcesNamedTool reports whether m, a Messages request's members, forces
// a named tool: tool_choice {"type":"tool","name":…}. vLLM serves it as a
// chat completion with that named tool choice, whose tool call's
// arguments are the generated text as is, and its Messages handler
// decodes them as JSON to build the tool_use block (json.loads in
// AnthropicServingMessages.messages_full_converter, unguarded): the one
// token of a prefill is no JSON object, so vLLM answers the prefill 500
// after computing it. "any" (vLLM's "required", whose output it parses
// leniently), "auto" and "none" prefill; so does a chat completion naming
// a function, whose arguments vLLM keeps as text. Package disagg's
// profile keeps such a request local (reason forced_tool) by the same
// rule.
func forcesNamedTool(m map[string]json.RawMessage) bool {
	raw := m[fieldToolChoice]
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var v [1][]byte // the member named exactly "type", as pydantic reads it
	if jsonscan.Members(raw, typeMember, v[:]) != nil || len(v[0]) == 0 || v[0][0] != '"' {
		return false
	}
	typ, err := jsonscan.Unquote(v[0])
	return err == nil && typ == "tool"
}

// typeMember is the member of a tool_choice object forcesNamedTool reads.
var typeMember = []string{"type"}
