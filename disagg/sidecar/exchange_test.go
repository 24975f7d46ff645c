package sidecar

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine/server"
)

// The exchange as a gateway calls it, against simulated engines: a split
// returns the decode body with the prefiller's parameters; a client that
// went away is an error, not a fallback; a bad body is ErrBadRequest.
func TestExchangePrefillForAGateway(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	pre := startEngine(t, server.RolePrefill)
	x, err := NewExchange(Config{}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)

	body := []byte(`{"model":"m","prompt":"` + longPrompt + `","max_tokens":20}`)
	res, err := x.Prefill(context.Background(), pre.Addr(), "v1/completions", nil, body)
	require.NoError(t, err)
	require.True(t, res.Split)
	require.Empty(t, res.Fallback)
	require.Contains(t, string(res.Params), `"do_remote_prefill":true`)
	require.Contains(t, string(res.DecodeBody), `"max_tokens":20`)
	require.Equal(t, body, res.LocalBody, "no transfer parameters of the client's: a retry sends its body as it came")
	require.NotEmpty(t, res.RequestID)
	require.Positive(t, res.PrefillDuration)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = x.Prefill(ctx, pre.Addr(), "/v1/completions", nil, body)
	require.ErrorIs(t, err, context.Canceled)

	_, err = x.Prefill(context.Background(), pre.Addr(), "/v1/completions", nil, []byte(`[]`))
	require.ErrorIs(t, err, ErrBadRequest)
	small, err := NewExchange(Config{MaxBodyBytes: 10}, Options{})
	require.NoError(t, err)
	_, err = small.Prefill(context.Background(), pre.Addr(), "/v1/completions", nil, body)
	require.ErrorIs(t, err, ErrTooLarge)

	// A client request id is kept when printable, replaced otherwise.
	require.Equal(t, "abc-1", requestID(http.Header{"X-Request-Id": {"abc-1"}}))
	require.NotEqual(t, "a b", requestID(http.Header{"X-Request-Id": {"a b"}}))
}

// The largest maxPrefillResponseBytes bounds the prefiller's answer like
// any other: a split reads it whole. The byte read past the cap to tell an
// answer over it wrapped to a negative count there, read nothing, and
// every split fell back to a local prefill as bad_response.
func TestExchangeLargestPrefillResponseCapSplits(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	pre := startEngine(t, server.RolePrefill)
	x, err := NewExchange(Config{MaxPrefillResponseBytes: math.MaxInt64}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	body := []byte(`{"model":"m","prompt":"` + longPrompt + `","max_tokens":20}`)
	res, err := x.Prefill(context.Background(), pre.Addr(), "/v1/completions", nil, body)
	require.NoError(t, err)
	require.True(t, res.Split, "fallback %q", res.Fallback)
	require.Contains(t, string(res.Params), `"do_remote_prefill":true`)
}

// ValidTarget accepts a host (an IPv4 address, a bracketed IPv6 one, a
// DNS name) and a decimal port, nothing else: before, a sign or a run of
// zeros in the port, a control character, a backslash or other punctuation
// in the host, or a bracketed host that is no IPv6 address passed it, and
// Options.AllowTarget was asked about addresses the prefill request could
// not carry (or carried otherwise).
func TestValidTarget(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8000", "prefill-0.svc:80", "[::1]:9000", "prefill-0.prefill.ns.svc.cluster.local.:8000",
		"[::ffff:10.0.0.1]:80", "my_host:80", "h:080", "H:65535"} {
		require.True(t, ValidTarget(ok), ok)
	}
	for _, bad := range []string{"", "host", "host:0", "host:70000", "host:x", ":80", "http://h:80", "u@h:80", "h/p:80", "h:80/x",
		"h:+80", "h:00000000000000000080", "h\\x:80", "h\x00:80", "h\t:80", "h\r\n:80", "[a]:80", "[1.2.3.4]:80",
		"[fe80::1%25eth0]:80", "é.com:80", "h;x:80", "h!$&'()*:80", "h,i:80", "-h:80", "h-.x:80", "h..x:80", ".:80",
		"10.0.0.1:80,10.0.0.2:80", "h: 80"} {
		require.False(t, ValidTarget(bad), "%q", bad)
	}
}

// AllowTarget guards which prefillers may be contacted: a refused one is a
// counted local-prefill fallback, and nothing reaches it.
func TestExchangeAllowTarget(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	pre := startEngine(t, server.RolePrefill)
	x, err := NewExchange(Config{}, Options{AllowTarget: func(hp string) bool { return hp != pre.Addr() }})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	body := []byte(`{"model":"m","prompt":"p","max_tokens":2}`)
	res, err := x.Prefill(context.Background(), pre.Addr(), "/v1/completions", nil, body)
	require.NoError(t, err)
	require.False(t, res.Split)
	require.Equal(t, ReasonNotAllowed, res.Fallback)
	require.Equal(t, body, res.DecodeBody)
	require.Equal(t, uint64(0), pre.Engine().Stats().RequestSuccess)
}

// The private client reaches prefillers and the decoder directly: a proxy
// named by HTTP_PROXY or HTTPS_PROXY (net/http's default transport follows
// them) would receive every request body, at an address AllowTarget never
// vetted.
func TestExchangeClientIgnoresProxyEnvironment(t *testing.T) {
	x, err := NewExchange(Config{}, Options{})
	require.NoError(t, err)
	defer x.Close()
	tr, ok := x.client.Transport.(*http.Transport)
	require.True(t, ok)
	require.Nil(t, tr.Proxy)
}

// A prefiller that answers an error status and then stalls on its body is
// a fallback for its status: before, the sidecar read the whole body
// first, waited out the prefill timeout, and counted the fallback as a
// timeout.
func TestExchangeCountsAnErrorStatusWhoseBodyStalls(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	release := make(chan struct{})
	pre := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "overloaded")
		_ = http.NewResponseController(w).Flush()
		select { // the rest of the body never comes
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(pre.Close)
	t.Cleanup(func() { close(release) })
	x, err := NewExchange(Config{PrefillTimeout: 300 * time.Millisecond}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	res, err := x.Prefill(context.Background(), strings.TrimPrefix(pre.URL, "http://"), "/v1/completions", nil,
		[]byte(`{"model":"m","prompt":"p"}`))
	require.NoError(t, err)
	require.Equal(t, ReasonStatus, res.Fallback)
}
