package kvindex

import "time"

// Speculate makes endpoint count as holding keys until ttl passes
// (Config.SpeculativeTTL when ttl <= 0). It covers the gap between a routing
// decision and the engine's BlockStored events: a request with the same
// prefix routed meanwhile sees the chosen endpoint as warm (an endpoint
// with non-prefix cache groups too: its groups count the speculated
// blocks as held, see groups.go). Blocks the
// endpoint already holds confirmed are left alone; a later confirmed store
// supersedes the speculation (the block then stays until the engine removes
// it). Repeating Speculate extends an entry's expiry, never shortens it.
// Expiry is enforced by Match immediately and by the sweeper (or Sweep),
// which removes the entries and counts them as evictions with reason
// "speculative_expired". Speculative entries count towards Config.MaxBytes
// like stored blocks; Speculate enforces that bound too.
func (ix *Index) Speculate(endpoint string, keys []Key, ttl time.Duration) {
	if len(keys) == 0 {
		return
	}
	if ttl <= 0 {
		ttl = ix.specTTL
	}
	exp := ix.expiryMs(ttl)
	ep, err := ix.lockEndpoint(endpoint, true)
	if err != nil {
		return // too many endpoints: speculation is best effort
	}
	ix.speculate(ep, keys, exp)
	ep.mu.Unlock()
	ix.enforceMemory()
}

// speculate adds the speculative entries of Speculate; ep.mu is held.
func (ix *Index) speculate(ep *endpoint, keys []Key, exp uint64) {
	defer ix.account(ep)
	for _, key := range keys {
		if v, ok := ix.blocks.Load(key); ok {
			if m, _ := v.find(ep.id); m != 0 && (!isSpec(m) || specExpiry(m) >= exp) {
				continue // confirmed, or already speculative for at least as long
			}
		}
		op := memberOp{kind: opSpec, exp: exp}
		ix.apply(ep, key, &op)
		if op.after != op.before {
			if len(ep.spec) == 0 || exp < ep.specMin {
				ep.specMin = exp
			}
			ep.spec = append(ep.spec, specEntry{key: key, exp: exp})
		}
	}
}

// Sweep removes every speculative entry that has expired by the index clock
// and returns how many it removed. The background sweeper calls it every
// Config.SweepInterval; callers with a virtual clock or a disabled sweeper
// may call it directly. It takes each endpoint's lock in turn, never all at
// once.
func (ix *Index) Sweep() (expired int) {
	now := ix.nowMs()
	ix.eps.Range(func(_ string, ep *endpoint) bool {
		ep.mu.Lock()
		if !ep.dead && len(ep.spec) > 0 && ep.specMin <= now {
			expired += ix.sweepEndpoint(ep, now)
		}
		ep.mu.Unlock()
		return true
	})
	return expired
}

// sweepEndpoint expires the endpoint's due speculative entries; ep.mu is held.
func (ix *Index) sweepEndpoint(ep *endpoint, now uint64) (expired int) {
	keep := ep.spec[:0]
	var minExp uint64
	for _, e := range ep.spec {
		if e.exp > now {
			if len(keep) == 0 || e.exp < minExp {
				minExp = e.exp
			}
			keep = append(keep, e)
			continue
		}
		v, ok := ix.blocks.Load(e.key)
		if !ok {
			continue
		}
		if m, _ := v.find(ep.id); !isSpec(m) || specExpiry(m) > now {
			continue // confirmed since, gone, or extended by a later entry
		}
		op := memberOp{kind: opExpire, exp: now}
		ix.apply(ep, e.key, &op)
		if op.before != 0 && op.after == 0 {
			expired++
		}
	}
	clear(ep.spec[len(keep):])
	ep.spec, ep.specMin = keep, minExp
	if cap(ep.spec) > 64 && cap(ep.spec) > 4*len(ep.spec) {
		ep.spec = append([]specEntry(nil), ep.spec...) // release a burst's memory
	}
	ix.evExpired.Add(uint64(expired))
	ix.account(ep)
	return expired
}
