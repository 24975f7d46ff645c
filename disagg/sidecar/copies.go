package sidecar

import "github.com/kvroute/kvroute/internal/bytebudget"

// copyKind names a copy of a client body that prefillText makes, by how
// long it lives.
type copyKind int

const (
	copyMembers copyKind = iota // the parsed members: until prefillText returns
	copyPrefill                 // the prefill request's body: until the decode body takes its room (moveTo)
	copyLocal                   // Result.LocalBody when it is a copy: with the Result
	copyDecode                  // Result.DecodeBody when Split: until the decoder's response ends
	copyText                    // a wide body's UTF-8 copy (PrefillWithin): while a body returned is it
	copyKinds
)

// copies charges the copies prefillText makes of a client body to a
// Handler's budget of Config.MaxBodyBytesInFlight, each before it is
// made, so that the budget bounds every byte the Handler holds of a
// request: its body, and the bodies built from it (a Budget of
// Exchange.PrefillWithin's caller likewise). A nil *copies charges
// nothing (Exchange.Prefill, whose caller owns its memory).
type copies struct {
	budget Budget
	held   [copyKinds]int64
}

// take charges n bytes of kind k; bytebudget.ErrNoRoom when there is no
// room for them.
func (c *copies) take(k copyKind, n int) error {
	if c == nil {
		return nil
	}
	if !c.budget.Acquire(int64(n)) {
		return bytebudget.ErrNoRoom
	}
	c.held[k] += int64(n)
	return nil
}

// reserve is take for kind k as the reserve function encodeObject calls
// before it allocates (nil when c charges nothing).
func (c *copies) reserve(k copyKind) func(n int) error {
	if c == nil {
		return nil
	}
	return func(n int) error { return c.take(k, n) }
}

// moveTo is reserve for kind to, drawing first on what kind from holds:
// that much of from's charge becomes to's, and only the rest is taken.
// The decode body, built once the prefill body is dropped, so takes the
// room the prefill body found (nil when c charges nothing).
func (c *copies) moveTo(from, to copyKind) func(n int) error {
	if c == nil {
		return nil
	}
	return func(n int) error {
		m := min(int64(n), c.held[from])
		c.held[from] -= m
		c.held[to] += m
		if rest := int64(n) - m; rest > 0 {
			return c.take(to, int(rest))
		}
		return nil
	}
}

// release gives back what kind k holds, once its copy is dropped.
func (c *copies) release(k copyKind) {
	if c != nil {
		c.budget.Release(c.held[k])
		c.held[k] = 0
	}
}

// releaseAll gives back what every kind holds.
func (c *copies) releaseAll() {
	for k := range copyKinds {
		c.release(k)
	}
}

// sameArray reports whether a and b are slices of one array (ending at
// the same element), so that dropping one does not free the other.
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}
