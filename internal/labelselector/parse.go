package labelselector

import (
	"fmt"
	"slices"
	"strconv"
)

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
	return &Error{Input: p.in, Pos: t.pos, Msg: msg}
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
