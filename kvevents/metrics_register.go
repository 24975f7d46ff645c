package kvevents

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// registrar registers a component's collectors through its telemetry.Set
// and remembers which ones it registered itself. A collector whose family
// another Pool or Applier already registered on the same registry is
// reused instead (so several share one registry) and is not remembered:
// it stays its registrant's. After the first failure it registers nothing
// more and keeps the error.
type registrar struct {
	set   telemetry.Set
	owned []prometheus.Collector
	err   error
}

// register registers c through r, or returns the collector already
// registered under the same descriptor. Any other failure is kept in r.err.
func register[C prometheus.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	err := r.set.Register(c)
	if err == nil {
		r.owned = append(r.owned, c)
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	r.err = err
	return c
}

// unregister unregisters every collector r registered, so the registry is
// left as r found it (on a failed constructor, or on Close).
func (r *registrar) unregister() {
	r.set.Unregister(r.owned...)
	r.owned = nil
}
