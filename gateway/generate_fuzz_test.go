package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// encodeGenerate writes p and salt back as a GenerateRequest body: the
// features grouped by modality, each modality's items in p's order.
func encodeGenerate(t *testing.T, p render.Prompt, salt string) []byte {
	type place struct {
		Offset int `json:"offset"`
		Length int `json:"length"`
	}
	type features struct {
		MMHashes       map[string][]string `json:"mm_hashes"`
		MMPlaceholders map[string][]place  `json:"mm_placeholders"`
	}
	req := struct {
		TokenIDs  []uint32  `json:"token_ids"`
		CacheSalt string    `json:"cache_salt"`
		Features  *features `json:"features,omitempty"`
	}{TokenIDs: p.TokenIDs, CacheSalt: salt}
	if p.Features != nil {
		req.Features = &features{MMHashes: map[string][]string{}, MMPlaceholders: map[string][]place{}}
		for _, m := range p.Features {
			req.Features.MMHashes[m.Modality] = append(req.Features.MMHashes[m.Modality], m.Hash)
			req.Features.MMPlaceholders[m.Modality] = append(req.Features.MMPlaceholders[m.Modality], place{m.Offset, m.Length})
		}
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return b
}

// FuzzGeneratePrompt feeds arbitrary client bodies to the token-in route's
// prompt reader (seed corpus in testdata/fuzz/FuzzGeneratePrompt): it never
// panics; a prompt it accepts has token IDs and features that each lie
// inside the prompt, sorted by offset and not overlapping (what vLLM
// admits), so that the block keys of a request do not depend on how it was
// written; it reads the members vLLM reads (exact names, the last of a
// repeated one); and the prompt written back as a body reads back
// identically.
func FuzzGeneratePrompt(f *testing.F) {
	for _, s := range []string{
		`{"token_ids":[1,2,3,4,5,6],"cache_salt":"x","features":{"mm_hashes":{"image":["b","a"],"audio":["c"]},` +
			`"mm_placeholders":{"image":[{"offset":4,"length":2},{"offset":0,"length":1}],"audio":[{"offset":2,"length":1}]}}}`,
		`{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":2,"length":9223372036854775807}]}}}`,
		`{"token_ids":[1,2],"features":{"mm_hashes":{"video":["v"],"audio":["a"],"image":["i"]},` +
			`"mm_placeholders":{"video":[{"offset":0,"length":1}],"audio":[{"offset":0,"length":2}],"image":[{"offset":0,"length":1}]}}}`,
		`{"token_ids":[],"cache_salt":null}`,
		`{"token_ids":[4294967295],"features":null,"cache_salt":"\ud800"}`,
		`{"token_ids":[1],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{}}}`,
		`[1,2]`,
		`{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":1}],"audio":[{"offset":1,"length":1}]}}}`,
		`{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"],"audio":["b"]},"mm_placeholders":{"image":[{"offset":0,"length":4}],"audio":[{"offset":1,"length":1}]}}}`,
		`{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["a","b"]},"mm_placeholders":{"image":[{"offset":2,"length":1},{"offset":0,"length":2}]},"kwargs_data":{"image":[null,"x"]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, salt, err := generatePrompt(body)
		if err != nil {
			return
		}
		n := len(p.TokenIDs)
		require.NotZero(t, n, "accepted a prompt without token IDs")
		for i, m := range p.Features {
			if m.Offset < 0 || m.Length <= 0 || m.Offset > n || m.Length > n-m.Offset {
				t.Fatalf("feature %+v lies outside the %d-token prompt", m, n)
			}
			if i > 0 {
				if prev := p.Features[i-1]; m.Offset < prev.Offset+prev.Length {
					t.Fatalf("features out of order or overlapping: %+v before %+v", prev, m)
				}
			}
		}
		// Every hash and every placeholder of the body is one of the items:
		// vLLM pairs them all, so none may be dropped. Maps read members
		// as vLLM does, by exact name with the last of a repeated one.
		var top, feats map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(body, &top))
		if f := top["features"]; f != nil && string(f) != "null" {
			require.NoError(t, json.Unmarshal(f, &feats))
			var hashes, places map[string][]json.RawMessage
			require.NoError(t, json.Unmarshal(feats["mm_hashes"], &hashes))
			require.NoError(t, json.Unmarshal(feats["mm_placeholders"], &places))
			nh, np := 0, 0
			for _, l := range hashes {
				nh += len(l)
			}
			for _, l := range places {
				np += len(l)
			}
			require.Len(t, p.Features, nh, "hashes")
			require.Len(t, p.Features, np, "placeholders")
		} else {
			require.Nil(t, p.Features)
		}
		var ids []*uint32
		require.NoError(t, json.Unmarshal(top["token_ids"], &ids))
		require.Len(t, p.TokenIDs, len(ids))
		for i, id := range ids {
			require.NotNil(t, id, "accepted a null token ID")
			require.Equal(t, *id, p.TokenIDs[i])
		}
		wantSalt := ""
		if raw, ok := top["cache_salt"]; ok {
			var s *string
			require.NoError(t, json.Unmarshal(raw, &s))
			if s != nil {
				wantSalt = *s
			}
		}
		require.Equal(t, wantSalt, salt)
		again, salt2, err := generatePrompt(encodeGenerate(t, p, salt))
		require.NoError(t, err)
		require.Equal(t, p, again)
		require.Equal(t, salt, salt2)
	})
}
