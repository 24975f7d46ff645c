package bench

import (
	"context"
	"sync"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
)

// warmFleet is the warm index shared by the Match and Pick benchmarks: a
// kvroute.Router (events off, render off) whose index holds 2^20 background
// blocks spread over 256 endpoints, plus three prompts stored as staircases
// of prefixes, so every Match has a known answer.
type warmFleet struct {
	router    *kvroute.Router
	ix        *kvindex.Index
	endpoints []string           // 256 endpoint IDs
	eps       []kvroute.Endpoint // the same, as router endpoints
	p2k       []uint32           // held by endpoints[:64] as Steps(64, 32)
	p32k      []uint32           // held by endpoints[:256] as Steps(256, 512)
	pPick     []uint32           // held by endpoints[:64] as Steps(64, 32)
	steps2k   []int
	steps32k  []int
	stepsPick []int
}

const (
	warmEndpoints  = 256
	warmBackground = 1 << 20
)

var (
	warmOnce sync.Once
	warm     *warmFleet
	warmErr  error
)

// getWarm builds the warm fleet once per process (about a second).
func getWarm(b *testing.B) *warmFleet {
	b.Helper()
	warmOnce.Do(func() { warm, warmErr = buildWarm() })
	if warmErr != nil {
		b.Fatalf("warm index: %v", warmErr)
	}
	return warm
}

func buildWarm() (*warmFleet, error) {
	cfg := kvroute.DefaultConfig()
	cfg.Model = Model
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Index.SweepInterval = -1
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		return nil, err
	}
	w := &warmFleet{router: r, ix: r.Index(), endpoints: EndpointIDs(warmEndpoints)}
	for _, id := range w.endpoints {
		w.eps = append(w.eps, kvroute.Endpoint{ID: id})
	}
	if _, err := Background(w.ix, w.endpoints, warmBackground, 256, 1); err != nil {
		return nil, err
	}
	bs := w.ix.BlockSize()
	w.p2k, w.steps2k = Tokens(1<<62, 2048), Steps(64, 2048/bs)
	w.p32k, w.steps32k = Tokens(1<<61, 32768), Steps(256, 32768/bs)
	w.pPick, w.stepsPick = Tokens(1<<60, 2048), Steps(64, 2048/bs)
	if err := Staircase(w.ix, w.endpoints[:64], w.p2k, w.steps2k, 1<<50); err != nil {
		return nil, err
	}
	if err := Staircase(w.ix, w.endpoints, w.p32k, w.steps32k, 2<<50); err != nil {
		return nil, err
	}
	if err := Staircase(w.ix, w.endpoints[:64], w.pPick, w.stepsPick, 3<<50); err != nil {
		return nil, err
	}
	return w, nil
}
