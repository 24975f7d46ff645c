package conftest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Case is one document decoded over a copy of Check's start value.
type Case[T any] struct {
	// Name names the case in Check's error; "" names it by its Doc.
	Name string
	// Doc is the JSON document.
	Doc string
	// Err is a fragment the decoding error must contain; "" means the
	// document must decode.
	Err string
	// Want edits a copy of the start value into what a document that
	// decodes must give; nil means the start value unchanged.
	Want func(*T)
}

// Check decodes every case's Doc with encoding/json over a copy of start
// and compares the outcome with the case's; then it encodes rt with
// encoding/json, checks that every fragment of contains is in the encoding,
// and decodes it into a zero T, which must equal rt. It returns the first
// difference, naming the case, or nil.
func Check[T any](start T, cases []Case[T], rt T, contains ...string) error {
	for _, c := range cases {
		if c.Name == "" {
			c.Name = c.Doc
		}
		got := start
		err := json.Unmarshal([]byte(c.Doc), &got)
		switch {
		case c.Err != "" && err == nil:
			return fmt.Errorf("case %q: %s decoded, want an error containing %q", c.Name, c.Doc, c.Err)
		case c.Err != "" && !strings.Contains(err.Error(), c.Err):
			return fmt.Errorf("case %q: error %q does not contain %q", c.Name, err, c.Err)
		case c.Err != "":
			continue
		case err != nil:
			return fmt.Errorf("case %q: %s: %w", c.Name, c.Doc, err)
		}
		want := start
		if c.Want != nil {
			c.Want(&want)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("case %q: %s decoded to %+v, want %+v", c.Name, c.Doc, got, want)
		}
	}
	out, err := json.Marshal(rt)
	if err != nil {
		return fmt.Errorf("marshal %+v: %w", rt, err)
	}
	for _, frag := range contains {
		if !strings.Contains(string(out), frag) {
			return fmt.Errorf("marshal wrote %s, without %s", out, frag)
		}
	}
	var back T
	if err := json.Unmarshal(out, &back); err != nil {
		return fmt.Errorf("decode what marshal wrote, %s: %w", out, err)
	}
	if !reflect.DeepEqual(back, rt) {
		return fmt.Errorf("marshal wrote %s, which decodes to %+v, not %+v", out, back, rt)
	}
	return nil
}
