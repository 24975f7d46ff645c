package sidecar

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// PrefillWithin sends a body over Config.MaxBodyBytes, which its caller
// took under a larger limit, to no prefiller: it falls back as
// body_too_large, counted, with the client's own kv_transfer_params
// dropped from the body the decoder gets, and the budget given back once
// the caller releases held. Prefill, whose copies nothing else bounds,
// still answers ErrTooLarge.
func TestPrefillWithinBodyOverTheLimitFallsBack(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	x, err := NewExchange(Config{MaxBodyBytes: 40}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	b := &bytebudget.Budget{Limit: 1 << 20}
	body := []byte(`{"model":"m","prompt":"` + longPrompt + `","kv_transfer_params":{"do_remote_prefill":true}}`)
	// An address nothing listens on: the prefill step must not try it.
	res, held, err := x.PrefillWithin(context.Background(), "127.0.0.1:1", "/v1/completions", nil, body, b)
	require.NoError(t, err)
	require.False(t, res.Split)
	require.Equal(t, ReasonBodyTooLarge, res.Fallback)
	require.NotContains(t, string(res.DecodeBody), "kv_transfer_params")
	require.Contains(t, string(res.DecodeBody), longPrompt)
	require.Equal(t, 1.0, testutil.ToFloat64(x.m.fallbacks.WithLabelValues(ReasonBodyTooLarge)))
	b.Release(held)
	require.Zero(t, b.InUse())

	_, err = x.Prefill(context.Background(), "127.0.0.1:1", "/v1/completions", nil, body)
	require.ErrorIs(t, err, ErrTooLarge)
}
