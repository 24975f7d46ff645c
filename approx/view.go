package approx

import "time"

// View is the endpoints' modes as of one refresh; it never changes.
type View struct {
	at      int64 // index clock, unix ns
	ids     []string
	modes   []Mode          // by ids
	byID    map[string]Mode // the same, for the pick path
	allLive bool
	enabled bool
}

// Mode is the mode of endpoint: precise when its stream was live at the
// refresh; otherwise approximate when the index is enabled, blind when it
// is not. An endpoint the index does not know (not in SetEndpoints) counts
// as not live.
func (v *View) Mode(endpoint string) Mode {
	if m, ok := v.byID[endpoint]; ok {
		return m
	}
	if v.enabled {
		return ModeApproximate
	}
	return ModeBlind
}

// AllLive reports that every known endpoint was precise at the refresh (and
// there was at least one): a router then needs no per-candidate mode.
func (v *View) AllLive() bool { return v.allLive }

// Current returns the endpoints' modes, reading the streams' states again
// first when the last read is older than Config.Refresh (one caller
// refreshes; the others get the previous view meanwhile). Endpoints found
// live lose their approximate entries (reason "live").
func (x *Index) Current() *View {
	v := x.view.Load()
	if x.static.Load() {
		return v // nothing changes between SetEndpoints calls: no clock read
	}
	if now := x.now(); now-v.at >= x.refreshD && x.bound.Load() {
		x.refresh(now)
		v = x.view.Load()
	}
	return v
}

// refresh rebuilds the view at now.
func (x *Index) refresh(now int64) {
	if !x.refreshing.CompareAndSwap(false, true) {
		return
	}
	defer x.refreshing.Store(false)
	x.mu.RLock()
	ids, live := x.known, x.live
	x.mu.RUnlock()
	v := &View{at: now, ids: ids, modes: make([]Mode, len(ids)), byID: make(map[string]Mode, len(ids)),
		enabled: x.cfg.Enabled, allLive: live != nil && len(ids) > 0}
	var nowLive []string
	for i, id := range ids {
		switch {
		case live != nil && live(id):
			v.modes[i] = ModePrecise
			nowLive = append(nowLive, id)
		case x.cfg.Enabled:
			v.modes[i] = ModeApproximate
			v.allLive = false
		default:
			v.modes[i] = ModeBlind
			v.allLive = false
		}
	}
	for i, id := range ids {
		v.byID[id] = v.modes[i]
	}
	x.view.Store(v)
	x.mu.RLock()
	held := nowLive[:0]
	for _, id := range nowLive {
		if x.eps[id] != nil {
			held = append(held, id)
		}
	}
	x.mu.RUnlock()
	for _, id := range held { // events flow: precise from now on
		x.drop(id, reasonLive)
	}
	x.refreshCapacities(ids, time.Unix(0, now))
	x.expireAll(now)
}
