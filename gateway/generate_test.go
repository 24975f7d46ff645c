package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
)

// generateBody is a GenerateRequest of tokens 1..n with the given features
// member.
func generateBody(n int, features string) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	return `{"token_ids":[` + strings.Join(ids, ",") + `],"features":` + features + `}`
}

// The token-in route refuses exactly the features vLLM refuses, and reads
// the items of the rest as vLLM's engine orders them.
func TestGeneratePromptFeaturesAsVLLM(t *testing.T) {
	img := func(off, n int) string {
		return `{"offset":` + strconv.Itoa(off) + `,"length":` + strconv.Itoa(n) + `}`
	}
	refused := []struct{ name, features, err string }{
		// A modality on one side only, whatever the other modalities hold.
		{"placeholders without hashes", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(0, 1) + `],"audio":[` + img(2, 1) + `]}}`, `"audio" has placeholders but no hashes`},
		{"empty placeholders without hashes", `{"mm_hashes":{},"mm_placeholders":{"image":[]}}`, `"image" has placeholders but no hashes`},
		{"hashes without placeholders", `{"mm_hashes":{"image":["a"],"audio":["b"]},"mm_placeholders":{"image":[` + img(0, 1) + `]}}`, `"audio" has hashes but no placeholders`},
		{"empty hashes without placeholders", `{"mm_hashes":{"image":[]},"mm_placeholders":{}}`, `"image" has hashes but no placeholders`},
		// Counts.
		{"more hashes than placeholders", `{"mm_hashes":{"image":["a","b"]},"mm_placeholders":{"image":[` + img(0, 1) + `]}}`, "2 hashes but 1 placeholders"},
		{"more placeholders than hashes", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(0, 1) + `,` + img(2, 1) + `]}}`, "1 hashes but 2 placeholders"},
		// Overlaps, within and across modalities.
		{"overlap in a modality", `{"mm_hashes":{"image":["a","b"]},"mm_placeholders":{"image":[` + img(0, 3) + `,` + img(2, 2) + `]}}`, "placeholders overlap"},
		{"overlap across modalities", `{"mm_hashes":{"image":["a"],"audio":["b"]},"mm_placeholders":{"image":[` + img(4, 2) + `],"audio":[` + img(1, 4) + `]}}`, "placeholders overlap"},
		{"nested placeholder", `{"mm_hashes":{"image":["a"],"audio":["b"]},"mm_placeholders":{"image":[` + img(0, 6) + `],"audio":[` + img(2, 1) + `]}}`, "placeholders overlap"},
		{"same offset", `{"mm_hashes":{"image":["a"],"audio":["b"]},"mm_placeholders":{"image":[` + img(1, 1) + `],"audio":[` + img(1, 1) + `]}}`, "placeholders overlap"},
		// The request model's types.
		{"empty features", `{}`, "mm_hashes is required"},
		{"null hashes", `{"mm_hashes":null,"mm_placeholders":{}}`, "mm_hashes is required"},
		{"no placeholders member", `{"mm_hashes":{}}`, "mm_placeholders is required"},
		{"null hash list", `{"mm_hashes":{"image":null},"mm_placeholders":{"image":[]}}`, `mm_hashes["image"] is null`},
		{"null hash", `{"mm_hashes":{"image":[null]},"mm_placeholders":{"image":[` + img(0, 1) + `]}}`, `mm_hashes["image"][0] is null`},
		{"null placeholder list", `{"mm_hashes":{"image":[]},"mm_placeholders":{"image":null}}`, `mm_placeholders["image"] is null`},
		{"null placeholder", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[null]}}`, `mm_placeholders["image"][0] is null`},
		{"placeholder without offset", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"length":1}]}}`, "needs an integer offset and length"},
		{"zero length", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(1, 0) + `]}}`, "must be > 0"},
		{"negative offset", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(-1, 2) + `]}}`, "must be >= 0"},
		{"float offset", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1.0,"length":1}]}}`, "cannot unmarshal"},
		{"string length", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":"1"}]}}`, "cannot unmarshal"},
		{"is_embed too short", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2,"is_embed":[true]}]}}`, "is_embed has 1 entries for a length of 2"},
		{"is_embed null entry", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":1,"is_embed":[null]}]}}`, "is_embed holds a null"},
		{"past the prompt", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(7, 2) + `]}}`, "does not end within the 8-token prompt"},
		{"kwargs_data of another modality", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(0, 1) + `]},"kwargs_data":{"audio":[null]}}`, "kwargs_data must name the same modalities"},
		{"kwargs_data too short", `{"mm_hashes":{"image":["a","b"]},"mm_placeholders":{"image":[` + img(0, 1) + `,` + img(1, 1) + `]},"kwargs_data":{"image":[null]}}`, `kwargs_data["image"] has 1 entries for 2 hashes`},
		{"kwargs_data not a string", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(0, 1) + `]},"kwargs_data":{"image":[5]}}`, "not a string or null"},
		{"mm_metadata null list", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[` + img(0, 1) + `]},"mm_metadata":{"image":null}}`, `mm_metadata["image"] is null`},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := generatePrompt([]byte(generateBody(8, c.features)))
			require.ErrorContains(t, err, c.err)
		})
	}

	accepted := []struct {
		name, features string
		want           []render.MMFeature
	}{
		{"no features", `null`, nil},
		{"no items", `{"mm_hashes":{},"mm_placeholders":{}}`, nil},
		{"empty lists", `{"mm_hashes":{"image":[]},"mm_placeholders":{"image":[]}}`, nil},
		{"unsorted in and across modalities, adjacent, ending at the prompt's end",
			`{"mm_placeholders":{"image":[` + img(6, 2) + `,` + img(0, 2) + `],"audio":[` + img(2, 4) + `]},` +
				`"mm_hashes":{"image":["b","a"],"audio":["c"]},"kwargs_data":{"image":[null,"AAAA"],"audio":[null]},"mm_metadata":null}`,
			[]render.MMFeature{{Modality: "image", Hash: "a", Offset: 0, Length: 2}, {Modality: "audio", Hash: "c", Offset: 2, Length: 4},
				{Modality: "image", Hash: "b", Offset: 6, Length: 2}}},
		{"is_embed and unknown members", `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":2,"is_embed":[false,true],"x":1}]},"requires_kv":false}`,
			[]render.MMFeature{{Modality: "image", Hash: "a", Offset: 1, Length: 2}}},
	}
	for _, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			p, _, err := generatePrompt([]byte(generateBody(8, c.features)))
			require.NoError(t, err)
			require.Equal(t, c.want, p.Features)
			require.Len(t, p.TokenIDs, 8)
		})
	}
}

// A body whose features vLLM would refuse is answered 400 by the gateway,
// counted as a bad request of the generate route, and reaches no engine.
func TestGenerateRefusedFeaturesAreCountedBadRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	resp := h.post(GeneratePath, `{"model":"m","token_ids":[1,2,3],"sampling_params":{},"features":{"mm_hashes":{"image":["a"]},`+
		`"mm_placeholders":{"image":[{"offset":0,"length":1}],"audio":[{"offset":1,"length":1}]}}}`)
	got := readAll(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, got)
	require.Contains(t, got, `modality \"audio\" has placeholders but no hashes`)
	require.Equal(t, 1.0, counter(t, h.reg, string(apiGenerate), ResultBadRequest))
	bodies, _ := h.ups[0].received()
	require.Empty(t, bodies)
}
