package kvroute

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvindex"
)

// newEventPool is replaced by the kvevents wiring.
func newEventPool(cfg Config, ix *kvindex.Index, reg prometheus.Registerer, log *slog.Logger) (eventSource, error) {
	return nil, nil
}
