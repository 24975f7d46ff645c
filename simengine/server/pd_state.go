package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pdState is a server's P/D machinery: the decoder's read client, the
// prefiller's lease table and the metrics. It owns no goroutine.
type pdState struct {
	cfg       PDConfig
	client    *http.Client
	leases    *leaseTable
	failures  *prometheus.CounterVec
	transfers *prometheus.CounterVec
	received  prometheus.Counter
}

func newPDState(cfg PDConfig, reg prometheus.Registerer) (*pdState, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &pdState{
		cfg:    cfg,
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		leases: &leaseTable{ttl: cfg.LeaseTTL, max: cfg.MaxLeases, now: time.Now, byID: map[string]lease{},
			held: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "simengine_kv_transfer_leases",
				Help: "Finished prefills whose KV blocks a decoder may still read (prefill role).",
			}),
			dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "simengine_kv_transfer_leases_dropped_total",
				Help: "Readable prefills dropped unread, by reason: expired (leaseTTL) or capacity (maxLeases).",
			}, []string{"reason"}),
		},
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simengine_kv_transfer_failures_total",
			Help: "KV reads from a prefiller that failed or came back short (decode role), by reason: unreachable, expired, evicted, bad_params.",
		}, []string{"reason"}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simengine_kv_transfers_total",
			Help: "Requests with do_remote_prefill (decode role), by outcome: ok, recompute (a failed read, the rest computed locally) or fail (kv_load_failure_policy fail).",
		}, []string{"outcome"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "simengine_kv_transfer_received_tokens_total",
			Help: "Prompt tokens whose KV a decoder read from a prefiller.",
		}),
	}
	p.leases.release = func(lease) {} // set by the server once its engine exists
	for _, r := range []string{failUnreachable, failExpired, failEvicted, failBadParams} {
		p.failures.WithLabelValues(r)
	}
	for _, o := range []string{"ok", "recompute", "fail"} {
		p.transfers.WithLabelValues(o)
	}
	p.leases.dropped.WithLabelValues("expired")
	p.leases.dropped.WithLabelValues("capacity")
	if cfg.Role == RoleBoth {
		return p, nil // an engine without a KV connector exports none of it
	}
	for _, c := range []prometheus.Collector{p.leases.held, p.leases.dropped, p.failures, p.transfers, p.received} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pdState) close() { p.client.CloseIdleConnections() }
