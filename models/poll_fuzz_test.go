package models

import (
	"math"
	"slices"
	"testing"
)

// FuzzModelList feeds arbitrary /v1/models answers, as an engine sends
// them, to the poller's decoder and to clean, with MaxModels from 1 to 70
// (seed corpus in testdata/fuzz/FuzzModelList). Nothing panics; the names
// kept are valid, distinct, in the answer's order and MaxModels at most,
// and the slice kept until the next answer has room for no more (a long
// list of names held the room for all of them); every name left out is
// counted; each kept name has its card, whose members are printable and
// bounded, and an adapter's parent is another name kept.
func FuzzModelList(f *testing.F) {
	f.Add([]byte(`{"object":"list","data":[{"id":"llama","object":"model","owned_by":"vllm","root":"/m/llama",`+
		`"parent":null,"max_model_len":8192},{"id":"sql","root":"/a/sql","parent":"llama"}]}`), uint8(63))
	f.Add([]byte(`{"data":[{"id":"a"},{"id":"a"},{"id":"b,c"},{"id":""},{"id":"d","parent":"d","max_model_len":-1,"owned_by":7}]}`), uint8(0))
	f.Add([]byte(`{"data":null}`), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, maxModels uint8) {
		cards, ok := decodeModelList(body)
		if !ok {
			return
		}
		p := &Poller{cfg: PollConfig{MaxModels: 1 + int(maxModels)%70}}
		c := p.clean(cards)
		if len(c.names) > p.cfg.MaxModels || cap(c.names) > p.cfg.MaxModels {
			t.Fatalf("%d names kept in room for %d, MaxModels %d", len(c.names), cap(c.names), p.cfg.MaxModels)
		}
		if c.dropped != len(cards)-len(c.names) {
			t.Fatalf("%d of %d names kept, %d counted as dropped", len(c.names), len(cards), c.dropped)
		}
		next := 0 // the names are a subsequence of the answer's
		for i, n := range c.names {
			if checkName(n) != nil || slices.Contains(c.names[:i], n) {
				t.Fatalf("kept name %q: invalid or repeated", n)
			}
			for next < len(cards) && cards[next].ID != n {
				next++
			}
			if next == len(cards) {
				t.Fatalf("names %q not in the answer's order", c.names)
			}
			next++
		}
		if len(c.cards) != len(c.names) || c.fieldsDropped > 3*len(c.names) {
			t.Fatalf("%d cards for %d names, %d fields dropped", len(c.cards), len(c.names), c.fieldsDropped)
		}
		for i, card := range c.cards {
			if card.ID != c.names[i] {
				t.Fatalf("card %d is %q's, name %q", i, card.ID, c.names[i])
			}
			for _, v := range []string{card.OwnedBy, card.Root} {
				if len(v) > MaxCardFieldBytes || !printable(v) {
					t.Fatalf("card member %q kept", v)
				}
			}
			if card.MaxModelLen < 0 || card.MaxModelLen > math.MaxInt32 {
				t.Fatalf("max_model_len %d kept", card.MaxModelLen)
			}
			if card.Parent != c.parents[card.ID] || card.Parent == card.ID ||
				card.Parent != "" && !slices.Contains(c.names, card.Parent) {
				t.Fatalf("card %+v: parent not another name kept (parents %v)", card, c.parents)
			}
		}
		if len(c.parents) > len(c.names) {
			t.Fatalf("%d parents for %d names", len(c.parents), len(c.names))
		}
	})
}
