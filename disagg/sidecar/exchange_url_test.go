package sidecar

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine/server"
)

// A prefiller known by its base URL is reached at that URL: an https
// prefiller behind a path prefix splits, with Config.PrefillerScheme left
// at http, and AllowTarget vets the URL's host:port. A base that is no
// http(s) base URL falls back as bad_target, the prefiller untouched; the
// budget is given back either way.
func TestExchangePrefillURLWithin(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	pre := startEngine(t, server.RolePrefill)
	var (
		mu    sync.Mutex
		paths []string
	)
	inner := http.StripPrefix("/pfx", pre.Handler())
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(tls.Close)
	var vetted []string
	x, err := NewExchange(Config{}, Options{Client: tls.Client(), AllowTarget: func(hp string) bool {
		vetted = append(vetted, hp)
		return true
	}})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	b := &bytebudget.Budget{Limit: 1 << 20}
	body := []byte(`{"model":"m","prompt":"` + longPrompt + `","max_tokens":20}`)

	res, held, err := x.PrefillURLWithin(context.Background(), tls.URL+"/pfx/", "/v1/completions", nil, body, b)
	require.NoError(t, err)
	require.True(t, res.Split, "fallback %q", res.Fallback)
	require.Contains(t, string(res.Params), `"do_remote_prefill":true`)
	b.Release(held)
	require.Zero(t, b.InUse())
	require.Equal(t, []string{strings.TrimPrefix(tls.URL, "https://")}, vetted)

	for _, base := range []string{"ftp://" + tls.Listener.Addr().String(), "https://", tls.URL + "/?a=b", tls.URL + "/#f",
		"https://u:p@" + tls.Listener.Addr().String(), "%zz"} {
		res, held, err = x.PrefillURLWithin(context.Background(), base, "/v1/completions", nil, body, b)
		require.NoError(t, err, base)
		require.False(t, res.Split, base)
		require.Equal(t, ReasonBadTarget, res.Fallback, base)
		b.Release(held)
		require.Zero(t, b.InUse(), base)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"/pfx/v1/completions"}, paths, "one prefill, at the prefix")
}
