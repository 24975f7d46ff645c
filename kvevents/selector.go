package kvevents

import (
	"fmt"
	"slices"
	"strings"
)

// SelectorOp is the operator of one selector requirement.
type SelectorOp uint8

// Selector operators, in the syntax of Kubernetes equality- and set-based
// label selectors.
const (
	OpEquals    SelectorOp = iota + 1 // k=v (or k==v): the label is present with value v
	OpNotEquals                       // k!=v: the label is absent or has another value
	OpIn                              // k in (a,b): the label is present with one of the values
	OpNotIn                           // k notin (a,b): the label is absent or has none of the values
	OpExists                          // k: the label is present
	OpNotExists                       // !k: the label is absent
)

// String returns the operator as written in a selector.
func (o SelectorOp) String() string {
	switch o {
	case OpEquals:
		return "="
	case OpNotEquals:
		return "!="
	case OpIn:
		return "in"
	case OpNotIn:
		return "notin"
	case OpExists:
		return "exists"
	case OpNotExists:
		return "!"
	}
	return "?"
}

// Requirement is one comma-separated term of a Selector.
type Requirement struct {
	Key    string
	Op     SelectorOp
	Values []string // one value for = and !=, the set for in and notin, none otherwise
}

// Matches reports whether labels satisfy r.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case OpEquals:
		return ok && v == r.Values[0]
	case OpNotEquals:
		return !ok || v != r.Values[0]
	case OpIn:
		return ok && slices.Contains(r.Values, v)
	case OpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case OpExists:
		return ok
	case OpNotExists:
		return !ok
	}
	return false
}

// Selector decides which endpoints the pool subscribes to, from their
// labels. It is the conjunction of its requirements; the zero Selector
// matches every endpoint. Parse one with ParseSelector.
type Selector struct {
	reqs []Requirement
	text string
}

// Requirements returns the parsed requirements (shared; do not modify).
func (s Selector) Requirements() []Requirement { return s.reqs }

// String returns the selector text it was parsed from.
func (s Selector) String() string { return s.text }

// Empty reports whether s matches everything.
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// Matches reports whether labels satisfy every requirement of s.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.reqs {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// SelectorError reports an invalid selector: where it went wrong and why.
type SelectorError struct {
	Input string // the whole selector
	Pos   int    // byte offset of the problem
	Msg   string // what was expected
}

// Error formats the error with the offending position.
func (e *SelectorError) Error() string {
	return fmt.Sprintf("kvevents: invalid label selector %q at offset %d: %s", e.Input, e.Pos, e.Msg)
}

// ParseSelector parses a comma-separated label selector:
//
//	k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k
//
// Keys are made of letters, digits and "-_./" (so "app.kubernetes.io/name"
// works); values of letters, digits and "-_." and may be empty for = and !=.
// Spaces around tokens are ignored. An empty or blank selector matches every
// endpoint. Errors are *SelectorError.
func ParseSelector(text string) (Selector, error) {
	p := selParser{in: text}
	s := Selector{text: text}
	p.space()
	if p.eof() {
		return s, nil
	}
	for {
		r, err := p.requirement()
		if err != nil {
			return Selector{}, err
		}
		s.reqs = append(s.reqs, r)
		p.space()
		if p.eof() {
			return s, nil
		}
		if p.peek() != ',' {
			return Selector{}, p.fail("expected ',' or end of selector")
		}
		p.pos++
		p.space()
		if p.eof() {
			return Selector{}, p.fail("expected a requirement after ','")
		}
	}
}

type selParser struct {
	in  string
	pos int
}

func (p *selParser) eof() bool  { return p.pos >= len(p.in) }
func (p *selParser) peek() byte { return p.in[p.pos] }

func (p *selParser) space() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.pos++
	}
}

func (p *selParser) fail(msg string) error {
	return &SelectorError{Input: p.in, Pos: p.pos, Msg: msg}
}

func isKeyChar(c byte) bool {
	return isValueChar(c) || c == '/'
}

func isValueChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

func (p *selParser) word(valid func(byte) bool) string {
	start := p.pos
	for !p.eof() && valid(p.peek()) {
		p.pos++
	}
	return p.in[start:p.pos]
}

func (p *selParser) key() (string, error) {
	k := p.word(isKeyChar)
	if k == "" {
		return "", p.fail("expected a label key")
	}
	return k, nil
}

func (p *selParser) requirement() (Requirement, error) {
	if p.peek() == '!' {
		p.pos++
		p.space()
		k, err := p.key()
		if err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: k, Op: OpNotExists}, nil
	}
	k, err := p.key()
	if err != nil {
		return Requirement{}, err
	}
	afterKey := p.pos
	p.space()
	if p.eof() || p.peek() == ',' {
		return Requirement{Key: k, Op: OpExists}, nil
	}
	switch {
	case strings.HasPrefix(p.in[p.pos:], "!="):
		p.pos += 2
		return p.single(k, OpNotEquals)
	case strings.HasPrefix(p.in[p.pos:], "=="):
		p.pos += 2
		return p.single(k, OpEquals)
	case p.peek() == '=':
		p.pos++
		return p.single(k, OpEquals)
	}
	if p.pos == afterKey {
		return Requirement{}, p.fail("expected an operator (=, ==, !=, in, notin)")
	}
	op := p.word(isValueChar)
	switch op {
	case "in":
		return p.set(k, OpIn)
	case "notin":
		return p.set(k, OpNotIn)
	}
	p.pos -= len(op)
	return Requirement{}, p.fail("expected an operator (=, ==, !=, in, notin)")
}

func (p *selParser) single(k string, op SelectorOp) (Requirement, error) {
	p.space()
	v := p.word(isValueChar)
	return Requirement{Key: k, Op: op, Values: []string{v}}, nil
}

func (p *selParser) set(k string, op SelectorOp) (Requirement, error) {
	p.space()
	if p.eof() || p.peek() != '(' {
		return Requirement{}, p.fail("expected '(' after " + op.String())
	}
	p.pos++
	var vals []string
	for {
		p.space()
		v := p.word(isValueChar)
		if v == "" {
			return Requirement{}, p.fail("expected a value in the set")
		}
		vals = append(vals, v)
		p.space()
		if p.eof() {
			return Requirement{}, p.fail("expected ')'")
		}
		switch p.peek() {
		case ',':
			p.pos++
		case ')':
			p.pos++
			return Requirement{Key: k, Op: op, Values: vals}, nil
		default:
			return Requirement{}, p.fail("expected ',' or ')' in the set")
		}
	}
}
