package kvindex

// Sharing an engine-hash pair between endpoints' tables (see engTable and
// engPool).

// appendShared appends a shared entry (pool index s, for hash h) as the
// newest and indexes it. The index has room for it.
func (t *engTable) appendShared(h uint64, s uint32) {
	t.grow()
	*t.unit(t.tail) = s
	t.insertIndex(h, t.tail)
	t.tail++
	t.live++
	t.units++
}

// toShared turns the private record at pos into a reference to pool entry
// s. Its last three units die, or are given back when it is the newest.
func (t *engTable) toShared(pos, s uint32) {
	off := pos - t.base
	t.priv[off/64] &^= 1 << (off % 64)
	*t.unit(pos) = s
	t.nPriv--
	t.units -= privUnits - 1
	if pos+privUnits == t.tail {
		t.tail = pos + 1
		return
	}
	for p := pos + 1; p < pos+privUnits; p++ {
		t.setDead(p)
	}
}

// adopt makes t's entry for h, which t just stored, refer to the same pool
// entry as o's when o stored the same key for h (sharing it first if o's
// entry is private), and reports whether it did. o is another endpoint's
// table; both endpoints' mutexes are held.
func (t *engTable) adopt(h uint64, o *engTable) bool {
	i, j := t.slot(h), o.slot(h)
	if i < 0 || j < 0 {
		return false
	}
	tp, op := t.posOf(t.index[i]), o.posOf(o.index[j])
	key := t.entry(tp).key
	if o.entry(op).key != key {
		return false // o maps h to other content: nothing to share
	}
	tPriv, oPriv := t.isPriv(tp), o.isPriv(op)
	switch {
	case !tPriv && !oPriv: // both in the pool (t's re-mapped alone): join o's
		if s := *o.unit(op); *t.unit(tp) != s {
			t.pool.acquire(s)
			t.pool.release(*t.unit(tp))
			*t.unit(tp) = s
		}
	case !tPriv: // o joins t's pool entry
		s := *t.unit(tp)
		t.pool.acquire(s)
		o.toShared(op, s)
		o.maybeCompact()
	case oPriv:
		s, ok := t.pool.share(h, key, 2)
		if !ok {
			return false
		}
		o.toShared(op, s)
		o.maybeCompact()
		t.toShared(tp, s)
	default:
		s := *o.unit(op)
		t.pool.acquire(s)
		t.toShared(tp, s)
	}
	return true
}
