package extproc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/session"
)

// sessionTurn runs one request through the picker as Envoy would, with the
// extra request headers, the response served by served (the pick when
// empty), and returns the destination list and the response's Set-Cookie
// (the picker's response-header mutation).
func sessionTurn(t *testing.T, h *harness, extra map[string]string, body string, served func(list []string) string) (list []string, cookie string) {
	t.Helper()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hdrs := envoyHeaders("/v1/completions", false, nil)
	for k, v := range extra {
		hs := hdrs.GetRequestHeaders().GetHeaders()
		hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	require.NoError(t, st.Send(hdrs))
	require.NoError(t, st.Send(bodyChunk(body, true)))
	hr, err := st.Recv()
	require.NoError(t, err)
	list = strings.Split(setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), ",")
	_, err = st.Recv() // the body's answer
	require.NoError(t, err)
	to := list[0]
	if served != nil {
		to = served(list)
	}
	require.NoError(t, st.Send(respHeaders(to, false)))
	rh, err := st.Recv()
	require.NoError(t, err)
	for _, o := range rh.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if o.GetHeader().GetKey() == "set-cookie" {
			require.Empty(t, cookie, "one cookie")
			// Beside the engine's cookies: Envoy's ext_proc filter reads
			// only append (unset is false: it would replace them).
			require.True(t, o.GetAppend().GetValue(), "beside the engine's cookies") //lint:ignore SA1019 the field Envoy's ext_proc reads
			require.Equal(t, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, o.GetAppendAction())
			cookie = string(o.GetHeader().GetRawValue())
		}
	}
	require.NoError(t, st.Send(respBody("data: [DONE]\n\n", true)))
	_, err = st.Recv()
	require.NoError(t, err)
	drain(t, st)
	return list, cookie
}

// Session affinity through the ext_proc picker over loopback gRPC, with
// simulated engines: a session header's turns stick though no two turns
// share a block; a request without a key gets llm-d's cookie naming its
// endpoint and, sending it back, sticks too with no cookie set again; when
// Envoy falls back to the next endpoint, the session follows the endpoint
// that served; a malformed header is counted and routed without a session.
func TestSessionAffinityThroughExtProc(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarnessOpts(t, Config{Fallbacks: 1}, harnessOpts{session: &session.Config{}}, engineOpts{}, engineOpts{}, engineOpts{}, engineOpts{})
	defer h.close()

	group := 500
	turn := func(extra map[string]string, served func([]string) string) ([]string, string) {
		group++
		return sessionTurn(t, h, extra, completionsBody(prompt(group, 40, "turn"), true), served)
	}
	hdr := map[string]string{"x-session-id": "conv-1"}
	list, cookie := turn(hdr, nil)
	home := list[0]
	require.Empty(t, cookie, "a header key: no cookie")
	for k := range 5 {
		list, _ := turn(hdr, nil)
		require.Equal(t, home, list[0], "turn %d", k)
	}
	h.idle()

	// No key: the response sets llm-d's cookie; sent back, it sticks.
	list, cookie = turn(nil, nil)
	cHome := list[0]
	require.Equal(t, "llm-d-session="+base64.StdEncoding.EncodeToString([]byte(cHome))+"; Path=/; HttpOnly; SameSite=Lax", cookie)
	value := strings.TrimPrefix(strings.SplitN(cookie, ";", 2)[0], "llm-d-session=")
	for k := range 5 {
		list, again := turn(map[string]string{"cookie": "theme=dark; llm-d-session=" + value}, nil)
		require.Equal(t, cHome, list[0], "cookie turn %d", k)
		require.Empty(t, again, "cookie turn %d: it names the endpoint already", k)
	}
	h.idle()

	// Envoy falls back: the session records the endpoint that served.
	fb := map[string]string{"x-session-id": "conv-fallback"}
	list, _ = turn(fb, func(l []string) string { require.Len(t, l, 2); return l[1] })
	servedBy := list[1]
	for k := range 3 {
		list, _ := turn(fb, nil)
		require.Equal(t, servedBy, list[0], "after the fallback, turn %d", k)
	}
	// A cookie session served by the fallback: the cookie is set again,
	// naming it.
	_, cookie = turn(map[string]string{"cookie": "llm-d-session=" + value}, func(l []string) string { return l[1] })
	require.NotEmpty(t, cookie)
	require.NotContains(t, cookie, value)
	h.idle()

	// Malformed: counted, routed.
	list, _ = turn(map[string]string{"x-session-id": strings.Repeat("z", 300)}, nil)
	require.NotEmpty(t, list[0])
	h.idle()

	require.Equal(t, 1.0, h.counter("kvroute_session_keys_total", map[string]string{"source": "invalid"}))
	require.Equal(t, 6.0, h.counter("kvroute_session_keys_total", map[string]string{"source": "cookie"}))
	require.Equal(t, 3.0, h.counter("kvroute_session_cookies_set_total", nil))
	require.GreaterOrEqual(t, h.counter("kvroute_session_lookups_total", map[string]string{"outcome": "hit"}), 13.0)
}

// engineCookies is an upstream transport whose engines answer with a
// cookie of their own.
type engineCookies struct{ next *http.Transport }

func (e engineCookies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.next.RoundTrip(r)
	if err == nil {
		resp.Header.Add("Set-Cookie", "engine=1; Path=/")
	}
	return resp, err
}

// End to end through envoysim, which applies header mutations as Envoy's
// ext_proc filter does: the session cookie set on the response to a
// request without a key goes beside the cookie the engine set, not in its
// place.
func TestEndToEndSessionCookieGoesBesideTheEnginesCookies(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarnessOpts(t, Config{}, harnessOpts{session: &session.Config{}}, engineOpts{})
	defer h.close()
	tr := engineCookies{next: &http.Transport{}}
	srv := httptest.NewServer(envoysim.New(envoysim.Config{ChunkBytes: 512}, h.client, &http.Client{Transport: tr}))
	client := &http.Client{Transport: &http.Transport{}}
	defer func() {
		client.CloseIdleConnections()
		srv.Close()
		tr.next.CloseIdleConnections()
	}()

	resp := postThrough(t, client, srv.URL, completionsBody(prompt(520, 30, "cookies"), false))
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	ep := resp.Header.Get(EndpointHeader)
	require.Equal(t, h.engines[0].id, ep)
	require.Equal(t, []string{
		"engine=1; Path=/",
		"llm-d-session=" + base64.StdEncoding.EncodeToString([]byte(ep)) + "; Path=/; HttpOnly; SameSite=Lax",
	}, resp.Header.Values("Set-Cookie"))
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_session_cookies_set_total", nil))
}

// With strict, a malformed session header or cookie is answered 400 by
// the picker in vLLM's error shape, and nothing is picked.
func TestSessionStrictThroughExtProc(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarnessOpts(t, Config{}, harnessOpts{session: &session.Config{Strict: true}}, engineOpts{}, engineOpts{})
	defer h.close()
	for _, extra := range []map[string]string{
		{"x-session-id": "two words"},
		{"cookie": "llm-d-session=" + strings.Repeat("q", 300)},
	} {
		ir := immediateFor(t, h, extra, completionsBody(prompt(1, 10, "x"), false))
		require.EqualValues(t, http.StatusBadRequest, ir.GetStatus().GetCode(), "%v", extra)
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(ir.GetBody(), &body))
		require.Equal(t, "BadRequestError", body.Error.Type)
		require.Contains(t, body.Error.Message, "malformed session key")
	}
	require.Equal(t, 2.0, h.counter("kvroute_session_keys_total", map[string]string{"source": "invalid"}))
	h.idle()
}

// A model no endpoint serves is answered 404 NotFoundError, the body the
// gateway (and vLLM) send, never routed cache-blind.
func TestUnknownModelIs404(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	h.picker.cfg.Model = "" // the body's model is the request's model (no LoRA reading)
	ir := immediateFor(t, h, nil, fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":1}`, "no-such-model"))
	require.EqualValues(t, http.StatusNotFound, ir.GetStatus().GetCode())
	var body map[string]map[string]any
	require.NoError(t, json.Unmarshal(ir.GetBody(), &body))
	require.Equal(t, map[string]any{"message": body["error"]["message"], "type": "NotFoundError", "param": nil, "code": 404.0}, body["error"])
	require.Contains(t, body["error"]["message"], "no endpoint serves the request's model")
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultBadRequest}))
}

func immediateFor(t *testing.T, h *harness, extra map[string]string, body string) *extprocv3.ImmediateResponse {
	t.Helper()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hdrs := envoyHeaders("/v1/completions", false, nil)
	for k, v := range extra {
		hs := hdrs.GetRequestHeaders().GetHeaders()
		hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	require.NoError(t, st.Send(hdrs))
	require.NoError(t, st.Send(bodyChunk(body, true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	ir := resp.GetImmediateResponse()
	require.NotNil(t, ir, "an immediate response (got %T)", resp.Response)
	drain(t, st)
	return ir
}
