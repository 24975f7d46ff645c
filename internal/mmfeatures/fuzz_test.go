package mmfeatures

import (
	"encoding/json"
	"testing"
)

// FuzzItems feeds arbitrary "features" objects of a GenerateRequest, and
// prompt lengths, to the decoder and Items (seed corpus in
// testdata/fuzz/FuzzItems): nothing panics; items it accepts lie inside
// the prompt, sorted by offset and not overlapping, each with a positive
// length; and there is one item for every hash of mm_hashes as vLLM reads
// it (exact member names, the last of a repeated one), none dropped.
func FuzzItems(f *testing.F) {
	for _, s := range []string{
		`{"mm_hashes":{"image":["b","a"],"audio":["c"]},"mm_placeholders":{"image":[{"offset":6,"length":2},{"offset":0,"length":2}],"audio":[{"offset":2,"length":4}]}}`,
		`{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2,"is_embed":[true,false]}]},"kwargs_data":{"image":[null]},"mm_metadata":{"image":["m"]}}`,
		`{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":2,"length":9223372036854775807}]}}`,
		`{"MM_HASHES":{"image":["a"]},"mm_hashes":{},"mm_placeholders":{}}`,
	} {
		f.Add([]byte(s), 8)
	}
	f.Fuzz(func(t *testing.T, body []byte, ntok int) {
		var feats Features
		if err := json.Unmarshal(body, &feats); err != nil {
			return
		}
		items, err := feats.Items(ntok)
		if err != nil {
			return
		}
		for i, it := range items {
			if it.Offset < 0 || it.Length <= 0 || it.Offset > ntok || it.Length > ntok-it.Offset {
				t.Fatalf("%s: item %+v lies outside the %d-token prompt", body, it, ntok)
			}
			if i > 0 {
				if prev := items[i-1]; it.Offset-prev.Offset < prev.Length {
					t.Fatalf("%s: items out of order or overlapping: %+v before %+v", body, prev, it)
				}
			}
		}
		var top map[string]json.RawMessage
		var hashes map[string][]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil || json.Unmarshal(top["mm_hashes"], &hashes) != nil {
			t.Fatalf("%s: accepted, but encoding/json reads no mm_hashes", body)
		}
		n := 0
		for _, l := range hashes {
			n += len(l)
		}
		if len(items) != n {
			t.Fatalf("%s: %d items for %d hashes", body, len(items), n)
		}
	})
}
