package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// JSON field names of the OpenAI request and of vLLM's KV-transfer
// parameters that the exchange reads or writes.
const (
	fieldKVTransferParams = "kv_transfer_params"
	fieldStream           = "stream"
	fieldStreamOptions    = "stream_options"
	fieldMaxTokens        = "max_tokens"
	fieldMaxCompletion    = "max_completion_tokens"
	fieldDoRemoteDecode   = "do_remote_decode"
	fieldDoRemotePrefill  = "do_remote_prefill"
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

// parseObject decodes a request body that must be one JSON object, keeping
// every field's raw value.
func parseObject(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: the body is null, not a JSON object", ErrBadRequest)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrBadRequest)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrBadRequest)
	}
	return m, nil
}

// PrefillBody returns the body sent to the prefiller for the client request
// body orig: the same request with max_tokens 1 (max_completion_tokens too
// when the client set it), stream false, no stream_options, and
// kv_transfer_params asking for a remote decode. Every other field is kept.
func PrefillBody(orig []byte) ([]byte, error) {
	m, err := parseObject(orig)
	if err != nil {
		return nil, err
	}
	m[fieldMaxTokens] = json.RawMessage(`1`)
	if _, ok := m[fieldMaxCompletion]; ok {
		m[fieldMaxCompletion] = json.RawMessage(`1`)
	}
	m[fieldStream] = json.RawMessage(`false`)
	delete(m, fieldStreamOptions)
	m[fieldKVTransferParams] = prefillRequestParams
	return json.Marshal(m)
}

// DecodeBody returns the body sent to the decoder: the client request orig,
// unchanged but for kv_transfer_params, set to params (the object the
// prefiller returned).
func DecodeBody(orig []byte, params json.RawMessage) ([]byte, error) {
	m, err := parseObject(orig)
	if err != nil {
		return nil, err
	}
	m[fieldKVTransferParams] = params
	return json.Marshal(m)
}

// TransferParams extracts kv_transfer_params from a prefiller's
// non-streaming response: it must be a JSON object whose do_remote_prefill
// is true (what a vLLM prefiller with a KV connector answers). The object is
// returned compacted, with every field the prefiller set, so connectors'
// fields the sidecar does not know travel to the decoder untouched.
func TransferParams(resp []byte) (json.RawMessage, error) {
	var r struct {
		Params json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, fmt.Errorf("prefiller response is not a JSON object: %w", err)
	}
	if len(r.Params) == 0 || string(r.Params) == "null" {
		return nil, errors.New("prefiller response has no kv_transfer_params (is its KV connector configured?)")
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(r.Params, &p); err != nil || p == nil {
		return nil, errors.New("prefiller kv_transfer_params is not a JSON object")
	}
	var remote bool
	if raw, ok := p[fieldDoRemotePrefill]; !ok || json.Unmarshal(raw, &remote) != nil || !remote {
		return nil, errors.New("prefiller kv_transfer_params lacks do_remote_prefill: true")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, r.Params); err != nil {
		return nil, fmt.Errorf("prefiller kv_transfer_params: %w", err)
	}
	return b.Bytes(), nil
}
