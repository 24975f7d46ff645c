package labelselector

import (
	"fmt"
	"slices"
	"strconv"
)

// selectorOp is the operator of one selector requirement.
type selectorOp uint8

// Selector operators, those of Kubernetes label selectors.
const (
	opEquals      selectorOp = iota + 1 // k=v, k==v: the label is present with value v
	opNotEquals                         // k!=v: the label is absent or has another value
	opIn                                // k in (a,b): the label is present with one of the values
	opNotIn                             // k notin (a,b): the label is absent or has none of the values
	opExists                            // k: the label is present
	opNotExists                         // !k: the label is absent
	opGreaterThan                       // k>n: the label is present, an integer, and greater than n
	opLessThan                          // k<n: the label is present, an integer, and less than n
)

// requirement is one comma-separated term of a Selector.
type requirement struct {
	key    string
	op     selectorOp
	values []string // one value for =, !=, > and <; the set for in and notin; none otherwise
	n      int64    // the value of > and <
}

// matches reports whether labels satisfy r, as Kubernetes' Requirement.Matches
// decides it.
func (r *requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.key]
	switch r.op {
	case opEquals, opIn:
		return ok && slices.Contains(r.values, v)
	case opNotEquals, opNotIn:
		return !ok || !slices.Contains(r.values, v)
	case opExists:
		return ok
	case opNotExists:
		return !ok
	case opGreaterThan, opLessThan:
		if !ok {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		return r.op == opGreaterThan && n > r.n || r.op == opLessThan && n < r.n
	}
	return false
}

// Selector decides from a set of labels whether they match. It is the
// conjunction of its requirements; the zero Selector matches every label
// set. Parse one with Parse.
type Selector struct {
	reqs []requirement
	text string
}

// String returns the selector text it was parsed from.
func (s Selector) String() string { return s.text }

// Matches reports whether labels satisfy every requirement of s.
func (s Selector) Matches(labels map[string]string) bool {
	for i := range s.reqs {
		if !s.reqs[i].matches(labels) {
			return false
		}
	}
	return true
}

// Error reports an invalid selector: where it went wrong and why.
type Error struct {
	Input string // the whole selector
	Pos   int    // byte offset of the problem
	Msg   string // what was expected
}

// Error formats the error with the offending position.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid label selector %q at offset %d: %s", e.Input, e.Pos, e.Msg)
}

// Parse parses a Kubernetes label selector and accepts exactly the
// texts Kubernetes' own parser (labels.Parse of k8s.io/apimachinery) accepts,
// with the same meaning, so a selector written for a Deployment or an
// InferencePool works unchanged. It is a comma-separated conjunction of
//
//	k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k  k>n  k<n
//
// A key is a name of at most 63 bytes (letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit), optionally after a prefix and
// a '/': a lower-case DNS subdomain of at most 253 bytes
// ("app.kubernetes.io/name"). A value is empty or follows the rules of a
// name. A set may be empty or hold empty values ("k in ()" holds just the empty value);
// n is a decimal int64. Spaces, tabs, CR and LF separate tokens, and, as in
// Kubernetes, a NUL byte ends the token it is in (the selector ends at one
// that starts a token). A blank selector matches every label set. Errors
// are *Error.
func Parse(text string) (Selector, error) {
	p := selParser{in: text, toks: lexSelector(text)}
	reqs, err := p.parse()
	if err != nil {
		return Selector{}, err
	}
	return Selector{reqs: reqs, text: text}, nil
}
