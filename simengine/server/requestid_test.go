package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// postH posts body as JSON with the given headers and returns the status,
// the response headers and the body.
func postH(t *testing.T, url string, hdr map[string]string, body any) (int, http.Header, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

// firstEventID returns the id of a JSON body, or of the first SSE data
// line of a stream (Anthropic's message_start carries it in message.id,
// the token-in route's chunks in request_id).
func firstEventID(t *testing.T, body []byte) string {
	t.Helper()
	type ids struct {
		ID        string `json:"id"`
		RequestID string `json:"request_id"`
		Message   *struct {
			ID string `json:"id"`
		} `json:"message"`
		Response *struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	pick := func(v ids) string {
		switch {
		case v.Message != nil:
			return v.Message.ID
		case v.Response != nil:
			return v.Response.ID
		case v.RequestID != "":
			return v.RequestID
		}
		return v.ID
	}
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("event:")) && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("data:")) {
		return pick(decode[ids](t, body))
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "[DONE]" {
			return pick(decode[ids](t, []byte(d)))
		}
	}
	t.Fatalf("no data line in %s", body)
	return ""
}

// requestIDRoutes are the generating routes with vLLM's request id rules:
// the prefix vLLM gives the id, whether the X-Request-Id header sets it
// (OpenAIServing._base_request_id; the Responses API reads only its body's
// request_id) and whether the body's request_id does.
var requestIDRoutes = []struct {
	name, path, prefix string
	header, bodyID     bool
	body               func(stream bool) map[string]any
}{
	{"completions", "/v1/completions", "cmpl-", true, true, func(stream bool) map[string]any {
		return map[string]any{"model": "m", "prompt": "hello", "max_tokens": 2, "stream": stream}
	}},
	{"chat", "/v1/chat/completions", "chatcmpl-", true, true, func(stream bool) map[string]any {
		b := chatBody("hello", 2)
		b["stream"] = stream
		return b
	}},
	{"messages", "/v1/messages", "chatcmpl-", true, false, func(stream bool) map[string]any {
		return map[string]any{"model": "m", "max_tokens": 2, "stream": stream,
			"messages": []map[string]any{{"role": "user", "content": "hello"}}}
	}},
	{"responses", "/v1/responses", "resp_", false, true, func(stream bool) map[string]any {
		return map[string]any{"model": "m", "input": "hello", "max_output_tokens": 2, "stream": stream}
	}},
	{"generate", GeneratePath, "generate-tokens-", true, true, func(stream bool) map[string]any {
		return map[string]any{"model": "m", "token_ids": []int{5, 6, 7}, "stream": stream,
			"sampling_params": map[string]any{"max_tokens": 2}}
	}},
}

// TestRequestIDLikeVLLM: each generating route builds its response's id as
// vLLM does: the X-Request-Id header's value after the route's prefix,
// else the body's request_id, else a generated one; /v1/messages answers
// with the chat completion's id it is served by, and /v1/responses reads
// only its body's request_id (the whole id, prefix included).
func TestRequestIDLikeVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	for _, rt := range requestIDRoutes {
		for _, stream := range []bool{false, true} {
			name := rt.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				code, _, body := postH(t, base+rt.path, nil, rt.body(stream))
				require.Equal(t, http.StatusOK, code, string(body))
				generated := firstEventID(t, body)
				require.True(t, strings.HasPrefix(generated, rt.prefix), generated)

				code, _, body = postH(t, base+rt.path, map[string]string{"X-Request-Id": "trace-42"}, rt.body(stream))
				require.Equal(t, http.StatusOK, code, string(body))
				if rt.header {
					require.Equal(t, rt.prefix+"trace-42", firstEventID(t, body))
				} else {
					require.NotContains(t, firstEventID(t, body), "trace-42")
				}

				b := rt.body(stream)
				b["request_id"] = "body-7"
				code, _, body = postH(t, base+rt.path, nil, b)
				require.Equal(t, http.StatusOK, code, string(body))
				switch {
				case rt.prefix == "resp_":
					require.Equal(t, "body-7", firstEventID(t, body), "the Responses API's id is its request_id")
				case rt.bodyID:
					require.Equal(t, rt.prefix+"body-7", firstEventID(t, body))
				default:
					require.NotContains(t, firstEventID(t, body), "body-7")
				}
				if rt.header && rt.bodyID {
					code, _, body = postH(t, base+rt.path, map[string]string{"X-Request-Id": "trace-43"}, b)
					require.Equal(t, http.StatusOK, code, string(body))
					require.Equal(t, rt.prefix+"trace-43", firstEventID(t, body), "the header wins over the body")
				}
			})
		}
	}
}

var uuidHex = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestIDHeaders: with EnableRequestIDHeaders (vLLM's
// --enable-request-id-headers) every response, whatever its route or
// status, carries X-Request-Id: the request's, or a random uuid4 in hex;
// without it none does.
func TestRequestIDHeaders(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true, EnableRequestIDHeaders: true})
	for _, rt := range requestIDRoutes {
		t.Run(rt.name, func(t *testing.T) {
			code, h, body := postH(t, base+rt.path, map[string]string{"X-Request-Id": "trace-9"}, rt.body(false))
			require.Equal(t, http.StatusOK, code, string(body))
			require.Equal(t, "trace-9", h.Get("X-Request-Id"))
			code, h, body = postH(t, base+rt.path, nil, rt.body(true))
			require.Equal(t, http.StatusOK, code, string(body))
			require.Regexp(t, uuidHex, h.Get("X-Request-Id"))
		})
	}
	code, h, _ := postH(t, base+"/v1/completions", map[string]string{"X-Request-Id": "bad-1"}, map[string]any{"model": "nope", "prompt": "x"})
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "bad-1", h.Get("X-Request-Id"), "errors carry it too")
	code, h, _ = postH(t, base+"/nowhere", nil, map[string]any{})
	require.Equal(t, http.StatusNotFound, code)
	require.Regexp(t, uuidHex, h.Get("X-Request-Id"))
	resp, err := testClient.Get(base + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Regexp(t, uuidHex, resp.Header.Get("X-Request-Id"))

	_, off := startServer(t, Config{EnableScaleOut: true})
	for _, rt := range requestIDRoutes {
		code, h, body := postH(t, off+rt.path, map[string]string{"X-Request-Id": "trace-9"}, rt.body(false))
		require.Equal(t, http.StatusOK, code, string(body))
		require.Empty(t, h.Values("X-Request-Id"), rt.name)
	}
}

// TestPDRemoteRequestIDUnique: two prefills sent with one X-Request-Id
// (a client's retry, or two clients' ids colliding) get distinct
// remote_request_ids, as vLLM's internal ids (the external id and eight
// random hex digits) are, so neither's held blocks are lost and each
// decoder reads its own.
func TestPDRemoteRequestIDUnique(t *testing.T) {
	_, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, EngineID: "p0"}})
	_, decURL := startServer(t, Config{PD: PDConfig{Role: RoleDecode, TransferTimePerToken: time.Microsecond}})
	hdr := map[string]string{"X-Request-Id": "same"}
	var kvs []*kvTransferParams
	for _, text := range []string{longText, "another " + longText} {
		code, _, b := postH(t, preURL+"/v1/chat/completions", hdr, prefillBody(text))
		require.Equal(t, http.StatusOK, code, string(b))
		a := decode[pdAnswer](t, b)
		require.NotNil(t, a.KV, string(b))
		require.Equal(t, "chatcmpl-same", firstEventID(t, b))
		require.True(t, strings.HasPrefix(a.KV.RemoteRequestID, "chatcmpl-same-"), a.KV.RemoteRequestID)
		kvs = append(kvs, a.KV)
	}
	require.NotEqual(t, kvs[0].RemoteRequestID, kvs[1].RemoteRequestID)
	for i, text := range []string{longText, "another " + longText} {
		code, b := post(t, decURL+"/v1/chat/completions", decodeBody(text, kvs[i]))
		require.Equal(t, http.StatusOK, code, string(b))
		a := decode[pdAnswer](t, b)
		require.Equal(t, a.Usage.PromptTokens-1, a.Usage.Details.Cached, "request %d read its blocks: %s", i, b)
	}
}
