package simengine

import (
	"testing"
)

// FuzzTokenize checks that any text tokenizes deterministically into
// in-range IDs and that the chat template never fails on known roles.
func FuzzTokenize(f *testing.F) {
	f.Add("Hello, world!")
	f.Add(" \n\t  x")
	f.Add("\xff\xfe invalid utf8 ééééééééééé")
	f.Fuzz(func(t *testing.T, text string) {
		a := Tokenize(nil, text)
		b := Tokenize(nil, text)
		if len(a) != len(b) {
			t.Fatalf("non-deterministic: %v vs %v", a, b)
		}
		for i, id := range a {
			if id != b[i] || id < TokenOffset || id >= TokenOffset+VocabSize {
				t.Fatalf("bad id %d at %d", id, i)
			}
		}
		if len(text) > 0 && len(a) == 0 {
			t.Fatalf("non-empty text %q gave no tokens", text)
		}
		_ = Detokenize(a)
		p, err := ApplyChatTemplate(nil, []Message{{"user", text}, {"assistant", text}}, text, true)
		if err != nil || len(p) != 2*len(a)+5+boolInt(text != "")*(len(a)+2) {
			t.Fatalf("template: %v, %d tokens", err, len(p))
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
