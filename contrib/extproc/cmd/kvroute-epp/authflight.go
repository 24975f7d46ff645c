package main

import "sync"

// authFlight is a review in flight for one cache key: the callers that
// miss the cache on that key while it is asked wait for its outcome
// instead of asking the API server again.
type authFlight struct {
	done chan struct{} // closed once d and err are set
	d    authDecision
	err  error
}

// authFlights are the reviews in flight by cache key, at most as many as
// the in-flight slots (each holds one), so the map is bounded by
// --metrics-auth-max-in-flight.
type authFlights struct {
	mu     sync.Mutex
	m      map[authKey]*authFlight
	onWait func() // tests: called as a caller joins a flight; nil otherwise
}

// join returns the flight in progress for key, or starts one (leader) when
// one of slots is free and admit, asked then, allows it; otherwise
// errAuthBusy when no slot is free, or errAuthThrottled when admit refuses.
func (fs *authFlights) join(key authKey, slots chan struct{}, admit func() bool) (f *authFlight, leader bool, err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[key]; f != nil {
		if fs.onWait != nil {
			fs.onWait()
		}
		return f, false, nil
	}
	select {
	case slots <- struct{}{}:
	default:
		return nil, false, errAuthBusy
	}
	if !admit() {
		<-slots
		return nil, false, errAuthThrottled
	}
	if fs.m == nil {
		fs.m = make(map[authKey]*authFlight)
	}
	f = &authFlight{done: make(chan struct{})}
	fs.m[key] = f
	return f, true, nil
}

// finish ends the leader's flight f for key with its outcome, frees its
// slot and wakes its waiters.
func (fs *authFlights) finish(key authKey, f *authFlight, slots chan struct{}, d authDecision, err error) {
	fs.mu.Lock()
	delete(fs.m, key)
	fs.mu.Unlock()
	<-slots
	f.d, f.err = d, err
	close(f.done)
}
