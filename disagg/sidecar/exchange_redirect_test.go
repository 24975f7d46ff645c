package sidecar

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A prefiller's redirect is an answer, not an address to follow: AllowTarget
// vets only the address the router named, so following a 307 would resend
// the client's prompt and headers to a host nobody vetted and take its
// transfer parameters as a split. It falls back as a status, with a private
// client and with one the caller passes (whose own policy follows
// redirects and is left as it was).
func TestExchangeFollowsNoRedirect(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	var elsewhereHits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhereHits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"elsewhere"}}`)
	}))
	t.Cleanup(elsewhere.Close)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(allowed.Close)
	addr := strings.TrimPrefix(allowed.URL, "http://")
	callers := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(callers.CloseIdleConnections)

	for name, client := range map[string]*http.Client{"private": nil, "the caller's": callers} {
		t.Run(name, func(t *testing.T) {
			x, err := NewExchange(Config{}, Options{Client: client, AllowTarget: func(hp string) bool { return hp == addr }})
			require.NoError(t, err)
			t.Cleanup(x.Close)
			body := []byte(`{"model":"m","prompt":"the client's prompt"}`)
			res, err := x.Prefill(context.Background(), addr, "/v1/completions", http.Header{"Authorization": {"Bearer secret"}}, body)
			require.NoError(t, err)
			require.False(t, res.Split)
			require.Equal(t, ReasonStatus, res.Fallback)
			require.Equal(t, body, res.DecodeBody)
			require.Zero(t, elsewhereHits.Load(), "a host AllowTarget never vetted got the prefill request")
		})
	}
	require.Nil(t, callers.CheckRedirect, "the caller's client is not changed")
}

// On a fallback the decoder prefills the request itself: the client's own
// kv_transfer_params (do_remote_prefill and an address of the client's
// choosing) are removed from what it gets, whatever the fallback's reason;
// a body without them goes as it came. LocalBody is the same rule on its
// own, and a split's Result carries it for a retry with a local prefill.
func TestFallbackDropsTheClientsTransferParams(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	var got atomic.Value
	dec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[]}`)
	}))
	t.Cleanup(dec.Close)
	h, err := NewHandler(Config{DecoderURL: dec.URL}, Options{AllowTarget: func(string) bool { return false }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })

	const params = `"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"x","remote_block_ids":[1],"remote_host":"169.254.169.254","remote_port":5600}`
	body := []byte(`{"model":"m","prompt":"p","max_tokens":5,` + params + `}`)
	status, _, _ := send(t, srv.URL+"/v1/completions", "10.9.9.9:8000", body)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"model":"m","prompt":"p","max_tokens":5}`, got.Load().(string),
		"a fallback meant to prefill locally handed the decoder the client's transfer parameters")

	local, err := LocalBody(body)
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"m","prompt":"p","max_tokens":5}`, string(local))
	plain := []byte(`{"model":"m", "prompt":"p"}`)
	local, err = LocalBody(plain)
	require.NoError(t, err)
	require.Equal(t, plain, local, "a body without transfer parameters is sent as it came")
	_, err = LocalBody([]byte(`[]`))
	require.ErrorIs(t, err, ErrBadRequest)

	x, err := NewExchange(Config{}, Options{AllowTarget: func(string) bool { return false }})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	res, err := x.Prefill(context.Background(), "10.9.9.9:8000", "/v1/completions", nil, body)
	require.NoError(t, err)
	require.Equal(t, ReasonNotAllowed, res.Fallback)
	require.Equal(t, res.LocalBody, res.DecodeBody)
	require.NotContains(t, string(res.LocalBody), "kv_transfer_params")
}
