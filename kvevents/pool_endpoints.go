package kvevents

// Ensure subscribes to ep, or updates its subscription. It is idempotent:
// an unchanged endpoint keeps its subscriber (label changes that still
// match are just recorded). A changed events address, replay address or
// model replaces the subscriber and clears the endpoint's entries. An
// endpoint whose labels do not match Options.Matcher is treated like Remove.
// Errors report an invalid endpoint, or a closed pool.
func (p *Pool) Ensure(ep Endpoint) error { return p.ensure(ep, nil) }

// EnsureFrom is Ensure for an endpoint whose index entries were restored
// (from a checkpoint) up to pos: when it creates the endpoint's stream, the
// stream starts with pos as its watermark instead of empty, so that the
// first connection replays from pos.Seq, compares the batch there with
// pos.Digest, and either continues after it (the same engine lifetime) or
// treats the engine as restarted (clears the endpoint and rebuilds it from
// 0). pos is ignored for an endpoint that already has a stream (kept, or
// replaced and its entries cleared) or does not match Options.Matcher. In
// bind mode pos applies to the endpoint's stream when its first message
// creates it, and is dropped if the endpoint is removed or relabelled out
// of the matcher first.
func (p *Pool) EnsureFrom(ep Endpoint, pos Position) error { return p.ensure(ep, &pos) }

// Position returns the stream position of the endpoint with this ID (the
// last applied sequence and its payload digest): the one its last applied
// batch recorded in the index (kvindex.Index.Position), which index
// snapshots persist, or, before the stream first connects, the position it
// will resume from. ok is false for an unknown endpoint or one with nothing
// applied.
func (p *Pool) Position(id string) (pos Position, ok bool) {
	st := p.stream(id)
	if st == nil {
		return Position{}, false
	}
	return st.position()
}

func (p *Pool) ensure(ep Endpoint, pos *Position) error {
	ep, err := ep.resolve(&p.cfg)
	if err != nil {
		return err
	}
	match := p.match(ep.Labels)
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errPoolClosed
	}
	after := p.src.ensureLocked(ep, match, pos)
	p.mu.Unlock()
	after()
	p.markSelected(ep.ID, match)
	return nil
}

// markSelected records whether the endpoint with this ID is one Options.Matcher
// refused, for kvroute_kv_events_endpoints_not_selected. It runs under opMu.
func (p *Pool) markSelected(id string, selected bool) {
	_, was := p.notSelected[id]
	switch {
	case !selected && !was:
		if p.notSelected == nil {
			p.notSelected = map[string]struct{}{}
		}
		p.notSelected[id] = struct{}{}
		p.m.NotSelected.Inc()
	case selected && was:
		delete(p.notSelected, id)
		p.m.NotSelected.Dec()
	}
}

// Remove stops the subscription of the endpoint with this ID and removes
// its entries from the index. Unknown IDs are ignored. In bind mode an
// engine that keeps publishing is indexed again only with BindAnyTopic.
func (p *Pool) Remove(id string) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	after := p.src.removeLocked(id)
	p.mu.Unlock()
	after()
	p.markSelected(id, true) // no longer known
}
