package extproc

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// subsetStringMD is the subset hint as one comma-separated string, as a
// gateway's header-to-metadata rule writes it.
func subsetStringMD(list string) *corev3.Metadata {
	inner := &structpb.Struct{Fields: map[string]*structpb.Value{DefaultSubsetKey: structpb.NewStringValue(list)}}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{DefaultSubsetNamespace: inner}}
}

// pickWithHint sends one request with the subset hint md and returns the
// destination the picker named, or the status of its immediate response.
func pickWithHint(t *testing.T, h *harness, md *corev3.Metadata) (dest string, code int) {
	t.Helper()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	defer func() { require.NoError(t, st.CloseSend()) }()
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, md)))
	require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(5, 40, "hint"), false), true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	if ir := resp.GetImmediateResponse(); ir != nil {
		return "", int(ir.GetStatus().GetCode())
	}
	return setHeader(resp.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), http.StatusOK
}

// A list item that is itself a comma-separated list (a header's value copied
// into the list as one item) names each of its endpoints, as the single
// string form does; reading it as one endpoint ID would admit none and
// answer every request 503.
func TestProcessSubsetHintListItemWithCommas(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	for _, want := range []string{h.engines[0].id, h.engines[1].id} {
		dest, code := pickWithHint(t, h, subsetMD("10.0.0.9:8000, "+want))
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, want, dest)
		dest, code = pickWithHint(t, h, subsetStringMD(want+",10.0.0.9:8000"))
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, want, dest)
	}
	h.idle()
}

// A bare "ip" in the subset hint admits every endpoint on that address (each
// data-parallel rank of a pod), and "ip:port" entries compare as addresses,
// as the Inference Extension's reference picker reads the hint; an address
// the hint does not name stays out.
func TestProcessSubsetHintMatchesAddresses(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	ids := map[string]bool{h.engines[0].id: true, h.engines[1].id: true}
	host, port, err := net.SplitHostPort(h.engines[1].id)
	require.NoError(t, err)

	for range 4 {
		dest, code := pickWithHint(t, h, subsetMD(host))
		require.Equal(t, http.StatusOK, code, "a bare address admits its endpoints")
		require.True(t, ids[dest], "destination %q", dest)
	}
	// The same endpoint written as an IPv4-mapped IPv6 address.
	dest, code := pickWithHint(t, h, subsetMD("10.0.0.9", net.JoinHostPort("::ffff:"+host, port)))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, h.engines[1].id, dest)

	_, code = pickWithHint(t, h, subsetMD("10.0.0.9", "[fd00::1]"))
	require.Equal(t, http.StatusServiceUnavailable, code, "an address of no endpoint admits none")
	h.idle()
}

// The subset hint's entries match endpoint IDs as addresses, in eps's order,
// and an ID that is no address only by its exact text.
func TestSubsetCandidatesForms(t *testing.T) {
	eps := []kvroute.Endpoint{{ID: "[fd00::1]:8000"}, {ID: "[fd00::1]:8001"}, {ID: "10.0.0.7:8000"}, {ID: "engine-a"}, {ID: "10.0.0.8:8000"}}
	ids := func(in []kvroute.Endpoint) []string {
		out := []string{}
		for _, ep := range in {
			out = append(out, ep.ID)
		}
		return out
	}
	for _, c := range []struct {
		hint []string
		want []string
	}{
		{[]string{"fd00::1"}, []string{"[fd00::1]:8000", "[fd00::1]:8001"}},
		{[]string{"[fd00:0::1]"}, []string{"[fd00::1]:8000", "[fd00::1]:8001"}},
		{[]string{"[fd00:0:0::1]:8001", "10.0.0.8:8000"}, []string{"[fd00::1]:8001", "10.0.0.8:8000"}},
		{[]string{"[::ffff:10.0.0.7]:8000", "engine-a"}, []string{"10.0.0.7:8000", "engine-a"}},
		{[]string{"10.0.0.7:9000", "10.0.0.9", "engine", "fd00::1:8000"}, []string{}},
		{nil, []string{}},
	} {
		require.Equal(t, c.want, ids(subsetCandidates(c.hint, eps)), "hint %q", c.hint)
	}
}

// subsetValueMD is the subset hint as any metadata value.
func subsetValueMD(v *structpb.Value) *corev3.Metadata {
	inner := &structpb.Struct{Fields: map[string]*structpb.Value{DefaultSubsetKey: v}}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{DefaultSubsetNamespace: inner}}
}

// A subset hint value that is not a string, a list item or the hint itself,
// names no endpoint and is counted; when no endpoint is left, the 503 says
// the hint was malformed instead of only that none of it is eligible. The
// hint's well-formed entries still route.
func TestProcessSubsetHintNotAString(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	message := func(md *corev3.Metadata) string {
		t.Helper()
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, md)))
		require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(6, 40, "hint"), false), true)))
		resp, err := st.Recv()
		require.NoError(t, err)
		ir := resp.GetImmediateResponse()
		require.NotNil(t, ir, "an immediate response (got %T)", resp.Response)
		require.EqualValues(t, http.StatusServiceUnavailable, ir.GetStatus().GetCode())
		drain(t, st)
		var body struct{ Error struct{ Message string } }
		require.NoError(t, json.Unmarshal(ir.GetBody(), &body))
		return body.Error.Message
	}
	invalid := func() float64 { return h.counter("kvroute_extproc_invalid_subset_hints_total", nil) }

	list, err := structpb.NewList([]any{"10.0.0.9:8000", 8000.0})
	require.NoError(t, err)
	msg := message(subsetValueMD(structpb.NewListValue(list)))
	require.Contains(t, msg, "subset hint is malformed")
	require.Contains(t, msg, "item 2 is a number")
	require.Equal(t, 1.0, invalid())

	msg = message(subsetValueMD(structpb.NewBoolValue(true)))
	require.Contains(t, msg, "subset hint is malformed")
	require.Contains(t, msg, "a bool")
	require.Equal(t, 2.0, invalid())

	msg = message(subsetMD("10.0.0.9:8000"))
	require.NotContains(t, msg, "malformed", "a well-formed hint that names no endpoint")
	require.Equal(t, 2.0, invalid())

	list, err = structpb.NewList([]any{nil, h.engines[1].id})
	require.NoError(t, err)
	dest, code := pickWithHint(t, h, subsetValueMD(structpb.NewListValue(list)))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, h.engines[1].id, dest)
	require.Equal(t, 3.0, invalid())
	h.idle()
}
