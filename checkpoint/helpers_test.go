package checkpoint

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

const (
	testModel     = "test-model"
	testBlockSize = 64
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// prompt returns n distinct tokens from seed.
func prompt(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*1_000_003 + i)
	}
	return t
}

// newIndex returns an empty index of block size bs, closed when the test
// ends.
func newIndex(t *testing.T, bs int) *kvindex.Index {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{BlockSize: bs, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	return ix
}

// started restores a new index of block size bs as a router's start does
// and starts the keeper, which the test's end closes (Close is idempotent).
func started(t *testing.T, bs int, cfg Config, boot BootstrapConfig, reg prometheus.Registerer) *Keeper {
	t.Helper()
	ix := newIndex(t, bs)
	k, err := Restore(t.Context(), ix, cfg, boot, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
	require.NoError(t, err)
	k.Start()
	t.Cleanup(k.Close)
	return k
}

// storeBlocks stores n blocks of tokens from seed on endpoint directly in
// the index, recording pos as the endpoint's position (as the event
// subscriber would).
func storeBlocks(t *testing.T, ix *kvindex.Index, endpoint string, seed, n int, pos string) []uint32 {
	t.Helper()
	toks := prompt(seed, n*ix.BlockSize())
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = uint64(seed*1000 + i)
	}
	pl := ix.LockPosition(endpoint)
	require.NoError(t, ix.Store(endpoint, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: toks,
		BlockSize: ix.BlockSize(), Model: testModel, Group: 0, Kind: "full_attention"}))
	pl.Set([]byte(pos))
	pl.Unlock()
	return toks
}

// peer serves a warm index's snapshot over a real HTTP server, through a
// Keeper's Handler.
func peer(t *testing.T, token string, bs int) (*Keeper, *httptest.Server) {
	t.Helper()
	if bs == 0 {
		bs = testBlockSize
	}
	k := started(t, bs, Config{}, BootstrapConfig{Token: token}, nil)
	for i := 0; i < 4; i++ {
		storeBlocks(t, k.ix, "10.0.0.1:8000", 30+i, 4, "peer-pos")
	}
	srv := httptest.NewServer(k.Handler())
	t.Cleanup(srv.Close)
	return k, srv
}

// boot restores a new index from b, as a router configured with it would.
func boot(t *testing.T, reg prometheus.Registerer, b BootstrapConfig) *Keeper {
	t.Helper()
	return started(t, testBlockSize, Config{}, b, reg)
}

// restores reads kvroute_index_restore_total{source, result} from reg.
func restores(t *testing.T, reg *prometheus.Registry, source, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_index_restore_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["source"] == source && got["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// familyNames lists the metric families registered on reg.
func familyNames(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := make([]string, 0, len(mfs))
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x10
	return c
}

func edit(b []byte, f func([]byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

func xxh64(b []byte) uint64 { return xxhash.Sum64(b) }
