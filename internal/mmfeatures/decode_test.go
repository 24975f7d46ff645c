package mmfeatures

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Features and Placeholder read their members as vLLM's models do: exact
// names, case variants ignored as unknown members, the last of a repeated
// name winning without merging into the first.
func TestFeaturesReadMembersAsVLLM(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []Item
		err        string
	}{
		{"exact", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2}]}}`,
			[]Item{{"image", "a", 1, 2}}, ""},
		{"case variant of mm_hashes alone", `{"MM_HASHES":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2}]}}`,
			nil, "mm_hashes is required"},
		{"case variant of mm_placeholders after it", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2}]},"Mm_Placeholders":{"image":[{"offset":0,"length":1}]}}`,
			[]Item{{"image", "a", 1, 2}}, ""},
		{"case variant of kwargs_data", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2}]},"Kwargs_Data":{"audio":[null]}}`,
			[]Item{{"image", "a", 1, 2}}, ""},
		{"case variant of length", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2,"LENGTH":5}]}}`,
			[]Item{{"image", "a", 1, 2}}, ""},
		{"case variant alone is no length", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"Length":2}]}}`,
			nil, "needs an integer offset and length"},
		{"repeated mm_placeholders: the last, not merged", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2}],"audio":[{"offset":4,"length":1}]},` +
			`"mm_placeholders":{"image":[{"offset":3,"length":2}]}}`, []Item{{"image", "a", 3, 2}}, ""},
		{"repeated kwargs_data: the last, not merged", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2}]},` +
			`"kwargs_data":{"image":[null],"audio":[null]},"kwargs_data":{"image":["x"]}}`, []Item{{"image", "a", 1, 2}}, ""},
		{"repeated is_embed: the last", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2,"is_embed":[true,false],"is_embed":[true]}]}}`,
			nil, "is_embed has 1 entries"},
		{"placeholder not an object", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[[1,2]]}}`, nil, "mm_placeholders: not a JSON object"},
		{"offset of the wrong type", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":"1","length":2}]}}`, nil, "offset: json: cannot unmarshal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f Features
			err := json.Unmarshal([]byte(c.body), &f)
			var items []Item
			if err == nil {
				items, err = f.Items(8)
			}
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, items)
		})
	}
	// null leaves the value as it is, as encoding/json does.
	f := Features{MMHashes: map[string][]*string{}}
	require.NoError(t, json.Unmarshal([]byte("null"), &f))
	require.NotNil(t, f.MMHashes)
}
