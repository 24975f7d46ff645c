package server

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// renderPool makes the render routes saturate like a vLLM renderer, whose
// tokenization is bound to about one core: at most workers renders are
// worked on at once, each for cost per prompt token, and the others wait
// first come, first served. A render whose client has gone is still worked
// on when its turn comes (tokenization is not interrupted), so a client that
// gives up does not relieve the renderer; only Close cuts the work short.
// A nil *renderPool renders at once.
type renderPool struct {
	slots  chan struct{}
	cost   time.Duration
	closed chan struct{}
	once   sync.Once

	busy, queued prometheus.Gauge
	abandoned    prometheus.Counter
}

// newRenderPool returns the pool of cfg.RenderWorkers workers, or nil when
// RenderWorkers is 0, registering its metrics on reg.
func newRenderPool(cfg Config, reg prometheus.Registerer) (*renderPool, error) {
	if cfg.RenderWorkers < 0 || cfg.RenderTokenCost < 0 {
		return nil, errors.New("simengine: renderWorkers and renderTokenCost must not be negative")
	}
	if cfg.RenderWorkers == 0 {
		return nil, nil
	}
	p := &renderPool{
		slots:  make(chan struct{}, cfg.RenderWorkers),
		cost:   cfg.RenderTokenCost,
		closed: make(chan struct{}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "simengine_render_workers_busy",
			Help: "Render workers tokenizing a prompt (at most Config.RenderWorkers).",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "simengine_render_queued",
			Help: "Render requests waiting for a render worker.",
		}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "simengine_render_abandoned_total",
			Help: "Renders worked on although their client had gone (the work a router's timeout does not save).",
		}),
	}
	for _, c := range []prometheus.Collector{p.busy, p.queued, p.abandoned} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// work holds a worker for tokens × cost, waiting for one first. It reports
// false when the server closed first.
func (p *renderPool) work(r *http.Request, tokens int) bool {
	if p == nil {
		return true
	}
	p.queued.Inc()
	select {
	case p.slots <- struct{}{}:
		p.queued.Dec()
	case <-p.closed:
		p.queued.Dec()
		return false
	}
	p.busy.Inc()
	defer func() {
		p.busy.Dec()
		<-p.slots
	}()
	t := time.NewTimer(time.Duration(tokens) * p.cost)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.closed:
		return false
	}
	if r.Context().Err() != nil {
		p.abandoned.Inc()
	}
	return true
}

// close cuts short the renders waiting or being worked on.
func (p *renderPool) close() {
	if p != nil {
		p.once.Do(func() { close(p.closed) })
	}
}

// saturate is the render routes' hook: it holds the request for its prompt
// tokens' worth of a render worker and answers 503 when the server closes
// meanwhile. It reports whether the route may answer.
func (s *Server) saturate(w http.ResponseWriter, r *http.Request, tokens int) bool {
	if s.render.work(r, tokens) {
		return true
	}
	writeDetail(w, http.StatusServiceUnavailable, "server shutting down")
	return false
}
