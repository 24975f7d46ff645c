package jsonscan

// SkipValue moves past one JSON value at Pos, validating it as
// encoding/json does, without building it. Whitespace before the value is
// not skipped (call WS first); whitespace inside it is.
//
// depth is the nesting the value at Pos has (the caller's count: its
// container's depth plus one); the values inside an object or array at
// depth d are at d+1. An object or array deeper than maxDepth is an error,
// and so is any value, a string, number or literal too, deeper than
// maxLeafDepth; pass math.MaxInt there to bound only objects and arrays.
// The two limits exist because the render client has always rejected any
// value past its bound, while the gateway bounds only the brackets. Both
// keep a hostile body from exhausting the stack.
func (s *Scanner) SkipValue(depth, maxDepth, maxLeafDepth int) error {
	if depth > maxLeafDepth {
		return s.Errorf("nesting deeper than %d", maxLeafDepth)
	}
	if s.Pos >= len(s.Buf) {
		return s.Errorf("unexpected end")
	}
	// Strings and numbers first: they are most of what a token list or a
	// chat body holds, and the cases are tried in order.
	switch c := s.Buf[s.Pos]; {
	case c == '"':
		_, err := s.SkipString()
		return err
	case c == '-' || '0' <= c && c <= '9':
		return s.SkipNumber()
	case (c == '{' || c == '[') && depth > maxDepth:
		return s.Errorf("nesting deeper than %d", maxDepth)
	case c == '{' || c == '[':
		return s.skipContainer(c, depth, maxDepth, maxLeafDepth)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.Errorf("unexpected character %q", s.Buf[s.Pos])
}

// skipContainer moves past the object or array that open ('{' or '[')
// starts at Pos: its members, each keyed by a string in an object, and its
// closing bracket. depth is the container's own.
func (s *Scanner) skipContainer(open byte, depth, maxDepth, maxLeafDepth int) error {
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	s.Pos++
	s.WS()
	if s.Consume(closer) {
		return nil
	}
	for {
		s.WS()
		if open == '{' {
			if _, err := s.SkipString(); err != nil {
				return err
			}
			s.WS()
			if !s.Consume(':') {
				return s.Errorf("expected ':'")
			}
			s.WS()
		}
		if err := s.SkipValue(depth+1, maxDepth, maxLeafDepth); err != nil {
			return err
		}
		s.WS()
		if s.Consume(',') {
			continue
		}
		if s.Consume(closer) {
			return nil
		}
		return s.Errorf("expected ',' or '%c'", closer)
	}
}

func (s *Scanner) literal(lit string) error {
	if !s.Literal(lit) {
		return s.Errorf("invalid literal")
	}
	return nil
}
