package extproc

import (
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestConformanceSelectionFollowsTheHeaderOrder(t *testing.T) {
	eps := []kvroute.Endpoint{
		{ID: "10.0.0.7:3000"}, {ID: "10.0.0.7:3002"}, {ID: "10.0.0.8:3000"}, {ID: "10.0.0.8:3002"},
		{ID: "[fd00::1]:3000"}, {ID: "[fd00::1]:3002"}, {ID: "10.0.0.9:3000"},
	}
	ids := func(values ...string) []string {
		sel, ok := conformanceSelection(values, eps)
		if !ok {
			return nil
		}
		out := []string{}
		for _, e := range sel {
			out = append(out, e.ID)
		}
		return out
	}
	require.Nil(t, ids(), "absent: every endpoint")
	require.Nil(t, ids(" , "), "empty: every endpoint")
	require.Equal(t, []string{"10.0.0.8:3000", "10.0.0.8:3002", "10.0.0.7:3000", "10.0.0.7:3002"}, ids("10.0.0.8,10.0.0.7"),
		"an ip names every rank, in the header's order")
	require.Equal(t, []string{"10.0.0.8:3002", "10.0.0.7:3000", "10.0.0.7:3002"}, ids("10.0.0.8:3002, 10.0.0.7"))
	require.Equal(t, []string{"10.0.0.9:3000"}, ids("10.0.0.9,10.0.0.9:3000,10.0.0.9"), "named twice counts once")
	require.Equal(t, []string{"[fd00::1]:3000", "[fd00::1]:3002"}, ids("fd00::1"))
	require.Equal(t, []string{"[fd00::1]:3000", "[fd00::1]:3002"}, ids("[fd00:0::1]"))
	require.Equal(t, []string{"[fd00::1]:3002"}, ids("[fd00::1]:3002"))
	require.Equal(t, []string{"10.0.0.7:3000", "10.0.0.9:3000"}, ids("10.0.0.7:3000", "10.0.0.9"), "several header lines")
	require.Equal(t, []string{}, ids("10.1.1.1,10.0.0.7:9999"), "none known")
}

func selectionHeaders(path, selection string, eos bool) *extprocv3.ProcessingRequest {
	m := envoyHeaders(path, eos, nil)
	hs := m.GetRequestHeaders().GetHeaders()
	hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: ConformanceSelectionHeader, RawValue: []byte(selection)})
	return m
}

// With the hooks on, the selection header decides the candidates (ordered,
// a list of one pins the request), a header naming no endpoint is answered
// 503, and the response headers carry the served endpoint Envoy reported,
// or the reference picker's failure text when it reported none. With the
// hooks off (the default) the header changes nothing and nothing is echoed.
func TestConformanceHooks(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{ConformanceTestHooks: true, Fallbacks: 1}, engineOpts{}, engineOpts{})
	defer h.close()
	a, b := h.engines[0].id, h.engines[1].id
	body := completionsBody(prompt(31, 30, "conformance"), false)

	route := func(selection string) (*extprocv3.ProcessingResponse, extprocv3.ExternalProcessor_ProcessClient) {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(selectionHeaders("/v1/completions", selection, false)))
		require.NoError(t, st.Send(bodyChunk(body, true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		return hr, st
	}
	for range 4 {
		for _, pin := range []string{a, b} {
			hr, st := route(pin)
			require.Equal(t, pin, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader),
				"pinned: no fallback outside the selection")
			_, err := st.Recv() // the body
			require.NoError(t, err)
			require.NoError(t, st.Send(respHeaders(pin, true)))
			rh, err := st.Recv()
			require.NoError(t, err)
			require.Equal(t, pin, setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), ConformanceServedHeader))
		}
	}
	hr, st := route(b + "," + a)
	list := setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
	require.ElementsMatch(t, []string{a, b}, strings.Split(list, ","))
	require.NoError(t, st.CloseSend()) // the stream's end releases the pick

	hr, _ = route("10.200.0.1")
	require.EqualValues(t, http.StatusServiceUnavailable, hr.GetImmediateResponse().GetStatus().GetCode())
	require.Contains(t, string(hr.GetImmediateResponse().GetBody()), ConformanceSelectionHeader)

	// Envoy that does not report the served endpoint fails the suite's check.
	_, st = route(a)
	_, err := st.Recv()
	require.NoError(t, err)
	noServed := respHeaders(a, true)
	noServed.MetadataContext = nil
	require.NoError(t, st.Send(noServed))
	rh, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, servedMissing, setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), ConformanceServedHeader))
	h.idle()

	off := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer off.close()
	seen := map[string]bool{}
	for i := range 20 {
		st, err := off.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(selectionHeaders("/v1/models", off.engines[0].id, true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		seen[setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)] = true
		require.NoError(t, st.Send(respHeaders(off.engines[i%2].id, true)))
		rh, err := st.Recv()
		require.NoError(t, err)
		require.Empty(t, setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), ConformanceServedHeader))
	}
	require.Len(t, seen, 2, "with the hooks off the header pins nothing")
}
