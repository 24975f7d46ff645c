package extproc

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// With the disagg profile, a split request's header answer names the
// decode endpoint in the destination header and the prefill endpoint in
// x-prefiller-host-port (overwriting any value the client sent), as llm-d's
// endpoint picker does; a request kept local carries no prefill endpoint
// and a client's own value is removed. Each stream's decision (both picks)
// is released when the stream ends.
func TestDisaggPrefillerHeader(t *testing.T) {
	defer leakcheck.Check(t)()
	prof, err := disagg.New(disagg.Config{NonCachedTokens: 200}, disagg.Options{})
	require.NoError(t, err)
	h := newHarnessProfile(t, Config{}, nil, prof, engineOpts{role: disagg.RolePrefill}, engineOpts{role: disagg.RoleDecode})
	defer h.close()
	pre, dec := h.engines[0].id, h.engines[1].id

	withClientValue := func(m *extprocv3.ProcessingRequest) *extprocv3.ProcessingRequest {
		hs := m.GetRequestHeaders().GetHeaders()
		hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: disagg.HeaderPrefiller, RawValue: []byte("203.0.113.9:1")},
			&corev3.HeaderValue{Key: disagg.HeaderPrefillerLLMD, RawValue: []byte("203.0.113.9:2")})
		return m
	}
	group := 300
	for _, tc := range []struct {
		name   string
		words  int
		client bool
		split  bool
	}{
		{"long prompt", 400, false, true},
		{"long prompt, client value", 400, true, true},
		{"short prompt", 20, false, false},
		{"short prompt, client value", 20, true, false},
	} {
		group++
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		hdrs := envoyHeaders("/v1/completions", false, nil)
		if tc.client {
			hdrs = withClientValue(hdrs)
		}
		require.NoError(t, st.Send(hdrs))
		require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(group, tc.words, tc.name), false), true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
		require.Equal(t, dec, setHeader(mut, DefaultDestinationHeader), tc.name)
		if tc.split {
			require.Equal(t, pre, setHeader(mut, disagg.HeaderPrefiller), tc.name)
			require.Equal(t, pre, setHeader(mut, disagg.HeaderPrefillerLLMD), "%s: llm-d's current name too", tc.name)
			for _, o := range mut.GetSetHeaders() {
				if k := o.GetHeader().GetKey(); k == disagg.HeaderPrefiller || k == disagg.HeaderPrefillerLLMD {
					require.Equal(t, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, o.GetAppendAction(), tc.name)
				}
			}
			_, reqs := h.load(pre)
			require.EqualValues(t, 1, reqs, "%s: the prefill pick is accounted", tc.name)
		} else {
			require.Empty(t, setHeader(mut, disagg.HeaderPrefiller), tc.name)
			require.Empty(t, setHeader(mut, disagg.HeaderPrefillerLLMD), tc.name)
			if tc.client {
				require.Equal(t, []string{disagg.HeaderPrefiller, disagg.HeaderPrefillerLLMD}, mut.GetRemoveHeaders(), tc.name)
			} else {
				require.Empty(t, mut.GetRemoveHeaders(), tc.name)
			}
		}
		_, err = st.Recv() // the body's answer
		require.NoError(t, err)
		drain(t, st)
		h.idle()
	}
}

// The request headers llm-d's routing sidecar acts on besides
// x-prefiller-host-port (the encoder list, the KV-cache source to pull
// from, the data-parallel rank to forward to) are never the picker's to
// set, so a client's own values are removed from every request Envoy
// forwards, with or without a P/D profile, as they would otherwise steer
// the decode pod's sidecar past the pick.
func TestClientSidecarRoutingHeadersRemoved(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	client := []string{disagg.HeaderPrefiller, "x-encoder-hosts-ports", "x-kv-cache-source-host-port", "x-data-parallel-host-port",
		disagg.HeaderPrefillerLLMD, "x-llm-d-encoder-hosts-ports", "x-llm-d-kv-cache-source-host-port"}
	for i, path := range []string{"/v1/completions", "/v1/models"} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		hdrs := envoyHeaders(path, path == "/v1/models", nil)
		hs := hdrs.GetRequestHeaders().GetHeaders()
		for _, k := range client {
			hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte("203.0.113.9:1")})
		}
		require.NoError(t, st.Send(hdrs))
		if path != "/v1/models" {
			require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(400+i, 20, path), false), true)))
		}
		hr, err := st.Recv()
		require.NoError(t, err)
		mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
		require.ElementsMatch(t, client, mut.GetRemoveHeaders(), path)
		for _, k := range client {
			require.Empty(t, setHeader(mut, k), "%s: %s", path, k)
		}
		drain(t, st)
		h.idle()
	}
}

// A prefill endpoint with an Address is named in the prefiller headers by
// the Address's host:port, where its requests go, not by its ID: the
// decode pod's sidecar prefills there.
func TestDisaggPrefillerHeaderNamesTheAddress(t *testing.T) {
	defer leakcheck.Check(t)()
	prof, err := disagg.New(disagg.Config{NonCachedTokens: 200}, disagg.Options{})
	require.NoError(t, err)
	h := newHarnessProfile(t, Config{}, nil, prof, engineOpts{role: disagg.RolePrefill, front: true}, engineOpts{role: disagg.RoleDecode})
	defer h.close()
	pre, dec := h.engines[0], h.engines[1].id
	want := pre.front.Listener.Addr().String()
	require.NotEqual(t, pre.id, want)

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(351, 400, "address"), false), true)))
	hr, err := st.Recv()
	require.NoError(t, err)
	mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
	require.Equal(t, dec, setHeader(mut, DefaultDestinationHeader))
	require.Equal(t, want, setHeader(mut, disagg.HeaderPrefiller))
	require.Equal(t, want, setHeader(mut, disagg.HeaderPrefillerLLMD))
	_, reqs := h.load(pre.id)
	require.EqualValues(t, 1, reqs, "the prefill pick is accounted under its ID")
	_, err = st.Recv() // the body's answer
	require.NoError(t, err)
	drain(t, st)
	h.idle()
}
