package cluster

// clearShared drops the peers' load, queue depths and list: routing goes
// on with local state only. healthMu is held.
func (r *Replica) clearShared() {
	r.clearViews()
	r.queues.peers.Store(nil)
	r.peersMu.Lock()
	r.peers = nil
	r.peersMu.Unlock()
	r.met.peers.Set(0)
}

// skipRefresh reports whether refresh should not run: the replica is
// degraded by failed reads alone, so the read loop alone probes Redis.
func (r *Replica) skipRefresh() bool {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	return r.degraded && !r.writeDown
}

// writesDown reports whether a refresh failed since the outage began and
// none has succeeded since.
func (r *Replica) writesDown() bool {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	return r.writeDown
}

// result records an operation's outcome and drives the degraded state:
// any failed refresh or read enters it (peer load is dropped: routing goes
// on with local state only), and it ends once each kind of operation that
// failed during the outage has succeeded again: a read after a failed
// read, a refresh (a write) after a failed refresh. A Redis that serves
// reads but refuses writes thus keeps the replica degraded.
func (r *Replica) result(op int, err error) {
	if err != nil && r.ctx.Err() != nil {
		return // closing
	}
	if err != nil {
		r.met.errors[op].Inc()
	}
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	if op == opRefresh || op == opRead {
		down := &r.readDown
		if op == opRefresh {
			down = &r.writeDown
		}
		*down = err != nil
	}
	switch {
	case err != nil && (op == opRefresh || op == opRead) && !r.degraded:
		r.degraded = true
		r.met.degraded.Set(1)
		r.met.outages.Inc()
		r.cleared.Store(true)
		r.clearShared()
		r.log.Warn("cluster: Redis unreachable, slow or refusing writes; routing on local state only until it answers", "op", opNames[op], "err", err)
	case err == nil && (op == opRefresh || op == opRead) && r.degraded && !r.readDown && !r.writeDown:
		r.degraded = false
		r.cleared.Store(false)
		r.met.degraded.Set(0)
		r.log.Info("cluster: Redis answers again; shared state resumed")
		if op == opRefresh { // the peers' load comes back with a read now, not a read period later
			select {
			case r.readNow <- struct{}{}:
			default:
			}
		}
	case err == nil && op == opRead && r.degraded:
		// Still degraded (writes fail): what a read racing the refresh
		// that failed took in is dropped again.
		r.clearShared()
	case err != nil && op == opSubscribe && !r.subDown:
		// Counted in kvroute_cluster_errors_total{op="subscribe"}; at Debug
		// so that an outage is the one line above, not one per connection.
		r.subDown = true
		r.log.Debug("cluster: decision subscription lost; retrying", "err", err)
	case err == nil && op == opSubscribe && r.subDown:
		r.subDown = false
		r.log.Debug("cluster: decision subscription restored")
	}
}
