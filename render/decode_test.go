package render

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func decode(t *testing.T, body string, array bool) (*Result, error) {
	t.Helper()
	res := &Result{}
	err := decodeResponse([]byte(body), array, math.MaxInt, false, res)
	return res, err
}

func TestDecodeCompletionsArrayOnePromptPerEntry(t *testing.T) {
	body := "[" + generateRequest([]uint32{1, 2, 3}, "", "salt-1") + ",\n " + generateRequest([]uint32{4294967295, 0}, "", "") + "]"
	res, err := decode(t, body, true)
	require.NoError(t, err)
	require.Len(t, res.Prompts, 2)
	require.Equal(t, []uint32{1, 2, 3}, res.Prompts[0].TokenIDs)
	require.Equal(t, []uint32{4294967295, 0}, res.Prompts[1].TokenIDs)
	require.Equal(t, "salt-1", res.CacheSalt)
}

func TestDecodeObjectForChatAndArrayRejected(t *testing.T) {
	res, err := decode(t, generateRequest([]uint32{7, 8}, "", ""), false)
	require.NoError(t, err)
	require.Len(t, res.Prompts, 1)
	require.Equal(t, []uint32{7, 8}, res.Prompts[0].TokenIDs)
	require.Empty(t, res.CacheSalt)

	_, err = decode(t, "["+generateRequest([]uint32{7}, "", "")+"]", false)
	require.ErrorIs(t, err, errDecode)

	// A completions answer given as a single object is one prompt.
	res, err = decode(t, generateRequest([]uint32{9}, "", ""), true)
	require.NoError(t, err)
	require.Len(t, res.Prompts, 1)
}

func TestDecodeMultimodalFeaturesSortedByOffset(t *testing.T) {
	features := `{"mm_hashes":{"image":["img-b","img-a"],"audio":["aud-1"]},` +
		`"mm_placeholders":{"image":[{"offset":20,"length":4,"is_embed":null},{"offset":3,"length":5}],"audio":[{"length":2,"offset":10}]},` +
		`"kwargs_data":{"image":[null,null]},"mm_metadata":null}`
	toks := make([]uint32, 30)
	res, err := decode(t, generateRequest(toks, features, ""), false)
	require.NoError(t, err)
	require.Equal(t, []MMFeature{
		{Modality: "image", Hash: "img-a", Offset: 3, Length: 5},
		{Modality: "audio", Hash: "aud-1", Offset: 10, Length: 2},
		{Modality: "image", Hash: "img-b", Offset: 20, Length: 4},
	}, res.Prompts[0].Features)
}

func TestDecodeTextOnlyHasNoFeatures(t *testing.T) {
	res, err := decode(t, generateRequest([]uint32{1}, `{"mm_hashes":null,"mm_placeholders":null}`, ""), false)
	require.NoError(t, err)
	require.Nil(t, res.Prompts[0].Features)
}

func TestDecodeHostileResponses(t *testing.T) {
	cases := map[string]string{
		"negative token":        `{"token_ids":[1,-2,3]}`,
		"fractional token":      `{"token_ids":[1,2.5]}`,
		"integral float token":  `{"token_ids":[1.0]}`,
		"exponent token":        `{"token_ids":[1e3]}`,
		"token above uint32":    `{"token_ids":[4294967296]}`,
		"huge token":            `{"token_ids":[99999999999999999999999999]}`,
		"leading zero":          `{"token_ids":[01]}`,
		"string token":          `{"token_ids":["1"]}`,
		"nested array":          `{"token_ids":[[1]]}`,
		"missing token_ids":     `{"request_id":"x"}`,
		"null token_ids":        `{"token_ids":null}`,
		"empty token_ids":       `{"token_ids":[]}`,
		"trailing comma":        `{"token_ids":[1,]}`,
		"unterminated":          `{"token_ids":[1,2`,
		"not JSON":              `<html>502 Bad Gateway</html>`,
		"empty body":            ``,
		"trailing data":         `{"token_ids":[1]} {}`,
		"deep nesting":          `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `,"token_ids":[1]}`,
		"placeholder outside":   `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":5}]}}}`,
		"hash count mismatch":   `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h","i"]},"mm_placeholders":{"image":[{"offset":0,"length":1}]}}}`,
		"hashes without places": `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{}}}`,
		"negative offset":       `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":-1,"length":1}]}}}`,
		"placeholder no length": `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":0}]}}}`,
		"non-string hash":       `{"token_ids":[1,2],"features":{"mm_hashes":{"image":[5]},"mm_placeholders":{"image":[{"offset":0,"length":1}]}}}`,
		// What vLLM's request model refuses in features is malformed in an
		// answer too: the two objects name the same modalities, lists are
		// lists, placeholders are neither empty nor overlapping.
		"places without hashes":       `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":0,"length":1}],"audio":[{"offset":1,"length":1}]}}}`,
		"empty places without hashes": `{"token_ids":[1,2],"features":{"mm_hashes":{},"mm_placeholders":{"image":[]}}}`,
		"empty hashes without places": `{"token_ids":[1,2],"features":{"mm_hashes":{"image":[]},"mm_placeholders":{}}}`,
		"null modality list":          `{"token_ids":[1,2],"features":{"mm_hashes":{"image":null},"mm_placeholders":{"image":null}}}`,
		"empty placeholder":           `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":0}]}}}`,
		"overlap in a modality":       `{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["h","i"]},"mm_placeholders":{"image":[{"offset":0,"length":2},{"offset":1,"length":2}]}}}`,
		"nested across modalities":    `{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["h"],"audio":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":3}],"audio":[{"offset":1,"length":1}]}}}`,
		"same offset":                 `{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["h"],"audio":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":1}],"audio":[{"offset":1,"length":1}]}}}`,
		"salt not a string":           `{"token_ids":[1],"cache_salt":5}`,
		"empty array":                 `[]`,
		"array of non-objects":        `[1,2]`,
		"unterminated string key":     `{"token_ids`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			array := strings.HasPrefix(body, "[")
			_, err := decode(t, body, array)
			require.Error(t, err)
			require.True(t, errors.Is(err, errDecode), "%v", err)
		})
	}
}

func TestDecodeToleratesEscapedKeysAndWhitespace(t *testing.T) {
	res, err := decode(t, " {\n\"token\\u005fids\" : [ 5 , 6 ] ,\"cache_salt\":\"s\\u00e9\"}\n", false)
	require.NoError(t, err)
	require.Equal(t, []uint32{5, 6}, res.Prompts[0].TokenIDs)
	require.Equal(t, "sé", res.CacheSalt)
}

// FuzzDecodeResponse checks that the decoder never panics and that whatever it
// accepts is a usable render result, whose token IDs as JSON (the
// renderer's bytes or written afresh) are what encoding/json writes.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(generateRequest([]uint32{1, 2, 3}, "", "")), false)
	f.Add([]byte("["+generateRequest([]uint32{1}, "", "s")+"]"), true)
	f.Add([]byte(`[{"token_ids":[0,10, 99,4294967295]},{"token_ids":[7,8]}]`), true)
	f.Fuzz(func(t *testing.T, body []byte, array bool) {
		res := &Result{}
		if err := decodeResponse(body, array, math.MaxInt, true, res); err != nil {
			if !errors.Is(err, errDecode) {
				t.Fatalf("error %v does not wrap errDecode", err)
			}
			return
		}
		if len(res.Prompts) == 0 {
			t.Fatal("accepted a response without prompts")
		}
		for _, p := range res.Prompts {
			if len(p.TokenIDs) == 0 {
				t.Fatal("accepted an empty prompt")
			}
			// The renderer's bytes, when kept, are what encoding/json writes.
			if want, _ := json.Marshal(p.TokenIDs); string(p.AppendTokenJSON(nil)) != string(want) || p.TokenJSONLen() != len(want) {
				t.Fatalf("token JSON %s (length %d), want %s", p.AppendTokenJSON(nil), p.TokenJSONLen(), want)
			}
			if !slices.IsSortedFunc(p.Features, func(a, b MMFeature) int { return a.Offset - b.Offset }) {
				t.Fatal("features not sorted by offset")
			}
			for i, m := range p.Features {
				if m.Offset < 0 || m.Length <= 0 || m.Offset+m.Length > len(p.TokenIDs) {
					t.Fatalf("feature %+v empty or outside the %d-token prompt", m, len(p.TokenIDs))
				}
				if i > 0 && m.Offset < p.Features[i-1].Offset+p.Features[i-1].Length {
					t.Fatalf("features %+v and %+v overlap", p.Features[i-1], m)
				}
			}
		}
	})
}
