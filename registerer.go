package kvroute

import (
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ownedRegisterer is the Registerer a Router hands to itself and to its
// parts (index, event pool, render client, load tracker, cluster replica, …):
// it passes every call to the caller's Registerer and remembers what was
// registered, so that Close unregisters exactly that. Without it a Router
// closed on a registry left its collectors there, and the next Router on
// the same registry failed with a duplicate registration.
type ownedRegisterer struct {
	reg prometheus.Registerer

	mu    sync.Mutex
	owned []prometheus.Collector
}

// Register registers c with the caller's Registerer and, when that
// succeeds, records it. A collector that is already registered (parts that
// share one, such as two render clients) stays its first owner's.
func (o *ownedRegisterer) Register(c prometheus.Collector) error {
	if err := o.reg.Register(c); err != nil {
		return err
	}
	o.mu.Lock()
	o.owned = append(o.owned, c)
	o.mu.Unlock()
	return nil
}

// MustRegister registers each collector and panics on the first error.
func (o *ownedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := o.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c and forgets it.
func (o *ownedRegisterer) Unregister(c prometheus.Collector) bool {
	o.mu.Lock()
	for i, oc := range o.owned {
		if sameCollector(oc, c) {
			o.owned = append(o.owned[:i], o.owned[i+1:]...)
			break
		}
	}
	o.mu.Unlock()
	return o.reg.Unregister(c)
}

// unregisterAll unregisters every collector still recorded, newest first.
func (o *ownedRegisterer) unregisterAll() {
	o.mu.Lock()
	owned := o.owned
	o.owned = nil
	o.mu.Unlock()
	for i := len(owned) - 1; i >= 0; i-- {
		o.reg.Unregister(owned[i])
	}
}

// sameCollector reports whether a and b are the same collector value,
// without panicking on collector types that cannot be compared.
func sameCollector(a, b prometheus.Collector) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta != nil && ta.Comparable() && a == b
}
