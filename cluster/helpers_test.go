package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/render"
)

const testModel = "test-model"

// fastCluster is a cluster configuration with short periods, so tests see
// expiry quickly; the lease still spans many refreshes on a loaded machine.
func fastCluster(addr, id string) cluster.Config {
	return cluster.Config{
		Addrs:         []string{addr},
		Pool:          "test",
		ReplicaID:     id,
		SnapshotURL:   "http://" + id + ".example:9090/snapshot",
		Lease:         1500 * time.Millisecond,
		RefreshPeriod: 50 * time.Millisecond,
		ReadPeriod:    50 * time.Millisecond,
		OpTimeout:     time.Second, // generous: a loaded CI machine must not look like an outage
	}
}

// newRouter builds a Router joined to the pool at addr; prompts are given
// (no render), events are off: the index learns from decisions only.
func newRouter(t testing.TB, addr, id string, mutate func(*kvroute.Config), opts kvroute.Options) *kvroute.Router {
	t.Helper()
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Cluster = fastCluster(addr, id)
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := kvroute.New(context.Background(), cfg, opts)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	require.NoError(t, r.SetEndpoints(endpoints(maxEndpoints)))
	return r
}

// maxEndpoints is how many endpoints (endpoints(maxEndpoints)) the tests'
// routers are given: a replica takes from its peers only its own endpoints.
const maxEndpoints = 64

func endpoints(n int) []kvroute.Endpoint {
	eps := make([]kvroute.Endpoint, n)
	for i := range eps {
		eps[i] = kvroute.Endpoint{ID: fmt.Sprintf("10.0.0.%d:8000", i+1)}
	}
	return eps
}

// prompt returns n tokens unique to seed.
func prompt(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*1_000_003 + i)
	}
	return t
}

func pick(t testing.TB, r *kvroute.Router, tokens []uint32, eps []kvroute.Endpoint) *kvroute.Decision {
	t.Helper()
	d, err := r.Pick(context.Background(), &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: tokens}}}, eps)
	require.NoError(t, err)
	return d
}

// loads returns what r's filter and scorer see per endpoint: tokens and
// requests, local + peers.
func loads(r *kvroute.Router, eps []kvroute.Endpoint) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, e := range eps {
		tok, req, _ := r.Load().Load(e.ID)
		m[e.ID] = [2]int64{tok, req}
	}
	return m
}

// localSum adds up the routers' local loads per endpoint.
func localSum(eps []kvroute.Endpoint, rs ...*kvroute.Router) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, e := range eps {
		var s [2]int64
		for _, r := range rs {
			tok, req := r.Load().LocalLoad(e.ID)
			s[0] += tok
			s[1] += req
		}
		m[e.ID] = s
	}
	return m
}

const waitFor = 20 * time.Second

// logCounter counts log records whose message contains a substring.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, r.Level.String()+" "+r.Message)
	c.mu.Unlock()
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }
func (c *logCounter) count(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}
