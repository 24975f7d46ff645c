package jsonscan_test

import (
	"errors"
	"fmt"
	"math"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// A caller's grammar on top of the Scanner: read the top-level "id" of an
// object, skipping every other member, and report where a body is broken.
func Example() {
	for _, body := range []string{
		`{"prompt":"a \"long\" text","id":42,"tags":[1,{"x":null}]}`,
		`{"prompt":"a","id":4x}`, // the number ends at x, which is no ',' or '}'

	} {
		s := jsonscan.Scanner{Buf: []byte(body)}
		s.WS()
		s.Consume('{')
		var id string
		var err error
		for err == nil {
			s.WS()
			start := s.Pos
			if _, err = s.SkipString(); err != nil {
				break
			}
			key := body[start+1 : s.Pos-1]
			s.WS()
			if !s.Consume(':') {
				err = s.Errorf("expected ':'")
				break
			}
			s.WS()
			v := s.Pos
			if err = s.SkipValue(2, 64, math.MaxInt); err != nil {
				break
			}
			if key == "id" {
				id = body[v:s.Pos]
			}
			s.WS()
			if s.Consume('}') {
				break
			}
			if !s.Consume(',') {
				err = s.Errorf("expected ',' or '}'")
			}
		}
		fmt.Println(id, err, errors.Is(err, jsonscan.ErrSyntax))
	}
	// Output:
	// 42 <nil> false
	// 4 invalid JSON at offset 20: expected ',' or '}' true
}
