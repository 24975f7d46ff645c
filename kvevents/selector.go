package kvevents

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// Selector decides which endpoints the pool subscribes to, from their
// labels. It is the conjunction of its requirements; the zero Selector
// matches every endpoint. Parse one with ParseSelector.
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

// ParseSelector parses a Kubernetes label selector and accepts exactly the
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
// that starts a token). A blank selector matches every endpoint. Errors are
// *SelectorError.
func ParseSelector(text string) (Selector, error) {
	p := selParser{in: text, toks: lexSelector(text)}
	reqs, err := p.parse()
	if err != nil {
		return Selector{}, err
	}
	return Selector{reqs: reqs, text: text}, nil
}

// selTok is the kind of a selector token.
type selTok uint8

const (
	tokEnd   selTok = iota // end of the selector
	tokIdent               // a key, a value, or a word
	tokComma               // ,
	tokOpen                // (
	tokClose               // )
	tokNot                 // !
	tokEq                  // =
	tokEqEq                // ==
	tokNotEq               // !=
	tokGt                  // >
	tokLt                  // <
	tokIn                  // the word in
	tokNotIn               // the word notin
)

type selToken struct {
	kind selTok
	text string
	pos  int
}

func isSelSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isSelSymbol(c byte) bool {
	switch c {
	case '=', '!', '(', ')', ',', '>', '<':
		return true
	}
	return false
}

var selSymbols = map[string]selTok{
	",": tokComma, "(": tokOpen, ")": tokClose, "!": tokNot, "=": tokEq,
	"==": tokEqEq, "!=": tokNotEq, ">": tokGt, "<": tokLt,
}

// lexSelector splits text into tokens, ending with tokEnd. A word is a run of
// bytes that are neither blanks nor symbols; "!=" and "==" are the only
// two-byte symbols. A NUL byte behaves as in Kubernetes' lexer, which reads
// it as the end of input: it ends the token it follows (and is skipped), and
// where a token would start it ends the selector.
func lexSelector(text string) []selToken {
	var toks []selToken
	i := 0
	for {
		for i < len(text) && isSelSpace(text[i]) {
			i++
		}
		if i >= len(text) || text[i] == 0 {
			return append(toks, selToken{kind: tokEnd, pos: i})
		}
		start := i
		if isSelSymbol(text[i]) {
			i++
			if (text[start] == '!' || text[start] == '=') && i < len(text) && text[i] == '=' {
				i++
			}
			toks = append(toks, selToken{kind: selSymbols[text[start:i]], text: text[start:i], pos: start})
		} else {
			for i < len(text) && text[i] != 0 && !isSelSpace(text[i]) && !isSelSymbol(text[i]) {
				i++
			}
			t := selToken{kind: tokIdent, text: text[start:i], pos: start}
			switch t.text {
			case "in":
				t.kind = tokIn
			case "notin":
				t.kind = tokNotIn
			}
			toks = append(toks, t)
		}
		if i < len(text) && text[i] == 0 {
			i++
		}
	}
}

// selParser is a recursive-descent parser over the tokens. Where a key or a
// value is expected the words in and notin are ordinary identifiers
// ("in in (notin)" is valid); only after a key are they operators.
type selParser struct {
	in   string
	toks []selToken
	i    int
}

// peek returns the next token without consuming it, reading in and notin as
// identifiers.
func (p *selParser) peek() selToken {
	t := p.toks[p.i]
	if t.kind == tokIn || t.kind == tokNotIn {
		t.kind = tokIdent
	}
	return t
}

// next consumes the next token, reading in and notin as identifiers; at the
// end it stays there.
func (p *selParser) next() selToken {
	t := p.peek()
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

func (p *selParser) fail(t selToken, msg string) error {
	return &SelectorError{Input: p.in, Pos: t.pos, Msg: msg}
}

func (p *selParser) parse() ([]requirement, error) {
	var reqs []requirement
	for {
		switch t := p.peek(); t.kind {
		case tokEnd:
			return reqs, nil
		case tokIdent, tokNot:
		default:
			return nil, p.fail(t, fmt.Sprintf("found %q, expected a requirement ('!' or a label key)", t.text))
		}
		r, err := p.requirement()
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
		switch t := p.next(); t.kind {
		case tokEnd:
			return reqs, nil
		case tokComma:
			if n := p.peek(); n.kind != tokIdent && n.kind != tokNot {
				return nil, p.fail(n, "expected a requirement after ','")
			}
		default:
			return nil, p.fail(t, fmt.Sprintf("found %q, expected ',' or end of selector", t.text))
		}
	}
}

func (p *selParser) requirement() (requirement, error) {
	r := requirement{}
	t := p.next()
	if t.kind == tokNot {
		r.op = opNotExists
		t = p.next()
	}
	if t.kind != tokIdent {
		return r, p.fail(t, "expected a label key")
	}
	if msg := labelKeyProblem(t.text); msg != "" {
		return r, p.fail(t, "label key "+msg)
	}
	r.key = t.text
	if n := p.peek(); r.op == opNotExists || n.kind == tokEnd || n.kind == tokComma {
		if r.op == 0 {
			r.op = opExists
		}
		return r, nil // after !key anything but ',' or the end fails in parse
	}
	op := p.toks[p.i] // in and notin are operators here
	p.i++
	switch op.kind {
	case tokIn, tokNotIn:
		r.op = opIn
		if op.kind == tokNotIn {
			r.op = opNotIn
		}
		vals, err := p.set()
		if err != nil {
			return r, err
		}
		r.values = vals
	case tokEq, tokEqEq, tokNotEq, tokGt, tokLt:
		r.op = map[selTok]selectorOp{tokEq: opEquals, tokEqEq: opEquals, tokNotEq: opNotEquals,
			tokGt: opGreaterThan, tokLt: opLessThan}[op.kind]
		v := selToken{pos: op.pos + len(op.text)}
		if n := p.peek(); n.kind != tokEnd && n.kind != tokComma {
			v = p.next()
			if v.kind != tokIdent {
				return r, p.fail(v, "expected a value after "+op.text)
			}
		}
		if r.op == opGreaterThan || r.op == opLessThan {
			n, err := strconv.ParseInt(v.text, 10, 64)
			if err != nil {
				return r, p.fail(v, "the value of "+op.text+" must be a decimal integer")
			}
			r.n = n
		}
		r.values = []string{v.text}
		if msg := labelValueProblem(v.text); msg != "" {
			return r, p.fail(v, "label value "+msg)
		}
	default:
		return r, p.fail(op, fmt.Sprintf("found %q, expected an operator (=, ==, !=, in, notin, >, <)", op.text))
	}
	return r, nil
}

// set parses "(a,b,…)". Empty members are the empty value: "()", "(,)" and
// "(a,,b)" hold "" as Kubernetes reads them.
func (p *selParser) set() ([]string, error) {
	if t := p.next(); t.kind != tokOpen {
		return nil, p.fail(t, "expected '(' after in or notin")
	}
	var vals []string
	add := func(t selToken) error {
		if msg := labelValueProblem(t.text); msg != "" {
			return p.fail(t, "label value "+msg)
		}
		if !slices.Contains(vals, t.text) {
			vals = append(vals, t.text)
		}
		return nil
	}
	if t := p.peek(); t.kind == tokClose {
		p.next()
		return []string{""}, nil
	} else if t.kind != tokIdent && t.kind != tokComma {
		return nil, p.fail(t, "expected a value, ',' or ')'")
	}
	for {
		switch t := p.next(); t.kind {
		case tokIdent:
			if err := add(t); err != nil {
				return nil, err
			}
			switch n := p.peek(); n.kind {
			case tokComma:
			case tokClose:
				p.next()
				return vals, nil
			default:
				return nil, p.fail(n, "expected ',' or ')' in the set")
			}
		case tokComma:
			empty := selToken{pos: t.pos}
			if len(vals) == 0 {
				_ = add(empty)
			}
			switch n := p.peek(); n.kind {
			case tokClose:
				_ = add(empty)
				p.next()
				return vals, nil
			case tokComma:
				_ = add(empty)
			}
		default:
			return nil, p.fail(t, "expected a value or ',' in the set")
		}
	}
}

// labelKeyProblem says why k is not a Kubernetes label key ("" when it is):
// [prefix "/"] name, the prefix a lower-case DNS-1123 subdomain of at most 253
// bytes, the name a label name.
func labelKeyProblem(k string) string {
	name := k
	if strings.Count(k, "/") > 1 {
		return "has more than one '/'"
	}
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		name = n
		switch {
		case prefix == "":
			return "has an empty prefix"
		case len(prefix) > 253:
			return "prefix is longer than 253 bytes"
		case !isDNSSubdomain(prefix):
			return "prefix is not a lower-case DNS subdomain"
		}
	}
	switch {
	case name == "":
		return "has an empty name"
	case len(name) > 63:
		return "name is longer than 63 bytes"
	case !isLabelName(name):
		return "name must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

// labelValueProblem says why v is not a Kubernetes label value ("" when it
// is): empty, or a label name of at most 63 bytes.
func labelValueProblem(v string) string {
	switch {
	case len(v) > 63:
		return "is longer than 63 bytes"
	case v != "" && !isLabelName(v):
		return "must be empty or letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isLabelName reports whether s matches ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9].
func isLabelName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is dot-separated DNS-1123 labels: each
// non-empty, lower-case letters, digits and '-', starting and ending with a
// letter or digit (the length bound is the caller's).
func isDNSSubdomain(s string) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			continue
		}
		l := s[start:i]
		if l == "" || !isLowerAlnum(l[0]) || !isLowerAlnum(l[len(l)-1]) {
			return false
		}
		for j := 1; j < len(l)-1; j++ {
			if !isLowerAlnum(l[j]) && l[j] != '-' {
				return false
			}
		}
		start = i + 1
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
