package jsonscan

// Object reads the object at Pos, calling member for each member with the
// offset of its key's opening quote (the key is Buf[keyStart:end] for the
// end SkipString left, quotes included), whether the key holds escapes,
// and Pos at the member's value; member must move Pos past the value. It
// stops at the first error, member's or the syntax's. Pos is left after
// the closing '}'.
func (s *Scanner) Object(member func(keyStart, keyEnd int, escaped bool) error) error {
	if !s.Consume('{') {
		return s.Errorf("expected an object")
	}
	s.WS()
	if s.Consume('}') {
		return nil
	}
	for {
		s.WS()
		ks := s.Pos
		esc, err := s.SkipString()
		if err != nil {
			return err
		}
		ke := s.Pos
		s.WS()
		if !s.Consume(':') {
			return s.Errorf("expected ':'")
		}
		s.WS()
		if err := member(ks, ke, esc); err != nil {
			return err
		}
		s.WS()
		if s.Consume(',') {
			continue
		}
		if s.Consume('}') {
			return nil
		}
		return s.Errorf("expected ',' or '}'")
	}
}

// Array reads the array at Pos, calling elem for each element with Pos at
// the element; elem must move Pos past it. It stops at the first error.
// Pos is left after the closing ']'.
func (s *Scanner) Array(elem func() error) error {
	if !s.Consume('[') {
		return s.Errorf("expected an array")
	}
	s.WS()
	if s.Consume(']') {
		return nil
	}
	for {
		s.WS()
		if err := elem(); err != nil {
			return err
		}
		s.WS()
		if s.Consume(',') {
			continue
		}
		if s.Consume(']') {
			return nil
		}
		return s.Errorf("expected ',' or ']'")
	}
}
