package models

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// labelDrops counts, for Registry.Annotate, the names endpoint labels list
// that it leaves out (invalid, over MaxNameBytes, repeated, beyond
// MaxModels, as the poller counts an answer's names) in
// kvroute_models_label_names_dropped{endpoint}: a gauge, since Annotate
// reads the same labels again on every change of the endpoints, holding
// the last Annotate's drops, one series per endpoint that dropped a name.
// The series of an endpoint that drops none any more, or left, is
// deleted, so that the series stay bounded by the endpoints.
type labelDrops struct {
	registered
	gauge *prometheus.GaugeVec

	mu    sync.Mutex
	shown map[string]bool // endpoint IDs with a series
}

func newLabelDrops(reg prometheus.Registerer) (*labelDrops, error) {
	d := &labelDrops{shown: map[string]bool{}}
	g, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvroute_models_label_names_dropped",
		Help: "Model names an endpoint's models label lists that were not kept, as of the last annotation of the endpoints: invalid, overlong, repeated (listed again in the same label), or beyond the per-endpoint bound.",
	}, []string{"endpoint"}), &d.registered)
	if err != nil {
		return nil, err
	}
	d.gauge = g
	return d, nil
}

// close deletes the series set shows and unregisters the gauge when it
// registered it.
func (d *labelDrops) close() {
	d.set(nil)
	d.unregister()
}

// set makes drops (endpoint ID to the names its label dropped, each
// above zero) the gauge's series. A nil labelDrops counts nothing.
func (d *labelDrops) set(drops map[string]int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.shown {
		if _, ok := drops[id]; !ok {
			d.gauge.DeleteLabelValues(id)
			delete(d.shown, id)
		}
	}
	for id, n := range drops {
		d.gauge.WithLabelValues(id).Set(float64(n))
		d.shown[id] = true
	}
}
