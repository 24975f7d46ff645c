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

// The token-in route reads a body's members as vLLM's GenerateRequest
// model does: by their exact names (a case variant is an unknown member,
// ignored), the last of a repeated name winning outright. encoding/json
// would read "TOKEN_IDS" as token_ids and merge a repeated features object
// into the first, routing by keys the engine never computes.
func TestGeneratePromptReadsMembersAsVLLM(t *testing.T) {
	const image = `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}]}}`
	imageAt := func(off int) []render.MMFeature {
		return []render.MMFeature{{Modality: "image", Hash: "a", Offset: off, Length: 2}}
	}
	for _, c := range []struct {
		name, body string
		ids        []uint32
		salt       string
		features   []render.MMFeature
		err        string
	}{
		{name: "case variant of token_ids ignored", body: `{"token_ids":[1,2,3,4],"TOKEN_IDS":[9]}`, ids: []uint32{1, 2, 3, 4}},
		{name: "case variant alone is no token_ids", body: `{"Token_Ids":[1,2]}`, err: "token_ids must be a non-empty list"},
		{name: "escaped name is the name", body: `{"token\u005fids":[5]}`, ids: []uint32{5}},
		{name: "case variant of cache_salt ignored", body: `{"token_ids":[1],"cache_salt":"a","CACHE_SALT":"b"}`, ids: []uint32{1}, salt: "a"},
		{name: "case variant of cache_salt alone", body: `{"token_ids":[1],"Cache_Salt":"b"}`, ids: []uint32{1}},
		{name: "case variant of features ignored", body: `{"token_ids":[1,2,3,4],"Features":` + image + `}`, ids: []uint32{1, 2, 3, 4}},
		{name: "case variant of mm_hashes", body: `{"token_ids":[1,2,3,4],"features":{"MM_Hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}]}}}`,
			err: "mm_hashes is required"},
		{name: "case variant of offset", body: `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"Offset":0,"length":2}]}}}`,
			ids: []uint32{1, 2, 3, 4}, features: imageAt(1)},
		{name: "case variant alone is no offset", body: `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"OFFSET":0,"length":2}]}}}`,
			err: "needs an integer offset and length"},
		{name: "case variant of is_embed", body: `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2,"is_embed":[true],"IS_EMBED":[true,true]}]}}}`,
			err: "is_embed has 1 entries for a length of 2"},
		{name: "repeated token_ids: the last", body: `{"token_ids":[9,9,9],"token_ids":[1,2]}`, ids: []uint32{1, 2}},
		{name: "repeated cache_salt: the last, even null", body: `{"token_ids":[1],"cache_salt":"a","cache_salt":null}`, ids: []uint32{1}},
		{name: "repeated features: the last, not merged", body: `{"token_ids":[1,2,3,4],"features":` + image +
			`,"features":{"mm_hashes":{"audio":["b"]},"mm_placeholders":{"audio":[{"offset":3,"length":1}]}}}`,
			ids: []uint32{1, 2, 3, 4}, features: []render.MMFeature{{Modality: "audio", Hash: "b", Offset: 3, Length: 1}}},
		{name: "repeated mm_hashes: the last, not merged", body: `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["x"],"audio":["y"]},` +
			`"mm_placeholders":{"image":[{"offset":0,"length":2}]},"mm_hashes":{"image":["a"]}}}`,
			ids: []uint32{1, 2, 3, 4}, features: imageAt(0)},
		{name: "repeated placeholder member: the last", body: `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2,"offset":2}]}}}`,
			ids: []uint32{1, 2, 3, 4}, features: imageAt(2)},
		{name: "null token ID refused", body: `{"token_ids":[1,null,3]}`, err: "token_ids: token ID 1"},
		// pydantic's lax int, as vLLM's token_ids: list[int] reads the IDs.
		{name: "integral float IDs", body: `{"token_ids":[1.0,2,3e0]}`, ids: []uint32{1, 2, 3}},
		{name: "string and boolean IDs", body: `{"token_ids":["7"," 8 ",true]}`, ids: []uint32{7, 8, 1}},
		{name: "fractional ID refused", body: `{"token_ids":[1,2.5]}`, err: "token_ids: token ID 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, salt, err := generatePrompt([]byte(c.body))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.ids, p.TokenIDs)
			require.Equal(t, c.salt, salt)
			require.Equal(t, c.features, p.Features)
		})
	}
}

// A GenerateRequest may carry its multimodal items as raw media in
// content_parts instead of features (vLLM's /inference/v1/generate,
// ServingTokens.serve_tokens): the engine then fetches the media, expands
// their placeholders in token_ids and hashes them, so from the first item
// on its blocks have tokens and extra keys the body does not give, and the
// body does not say where that item is. Such a prompt is marked RawMedia
// (the router routes it by load alone) exactly when vLLM resolves an item:
// a non-empty content_parts with a part of type image_url, audio_url or
// video_url, the only types vLLM parses; other parts add nothing and leave
// the prompt keyed by its tokens. content_parts and features together are
// refused, as vLLM's GenerateRequest refuses them, when both are set.
func TestGeneratePromptContentPartsAsVLLM(t *testing.T) {
	const image = `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}]}}`
	for _, c := range []struct {
		name, parts, features string
		raw                   bool
		err                   string
	}{
		{name: "image part", parts: `[{"type":"image_url","url":"https://x/a.png"}]`, raw: true},
		{name: "audio part", parts: `[{"type":"text"},{"type":"audio_url","url":"https://x/a.wav"}]`, raw: true},
		{name: "video part by uuid", parts: `[{"type":"video_url","uuid":"v1"}]`, raw: true},
		{name: "escaped type", parts: `[{"type":"image\u005furl","url":"u"}]`, raw: true},
		{name: "repeated type: the last", parts: `[{"type":"text","type":"image_url","url":"u"}]`, raw: true},
		{name: "repeated type: the last, not media", parts: `[{"type":"image_url","type":"text","url":"u"}]`},
		{name: "other types add nothing", parts: `[{"type":"text","text":"x"},{"type":"input_audio"},{"Type":"image_url"},{"type":5},{}]`},
		{name: "null", parts: `null`},
		{name: "empty", parts: `[]`},
		{name: "empty beside features", parts: `[]`, features: image},
		{name: "null beside features", parts: `null`, features: image},
		{name: "text parts beside features", parts: `[{"type":"text"}]`, features: image, err: "content_parts and features are mutually exclusive"},
		{name: "media beside features", parts: `[{"type":"image_url","url":"u"}]`, features: image, err: "content_parts and features are mutually exclusive"},
		{name: "not a list", parts: `{"type":"image_url"}`, err: "content_parts"},
		{name: "a part not an object", parts: `["image_url"]`, err: "content_parts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"token_ids":[1,2,3,4],"content_parts":` + c.parts
			if c.features != "" {
				body += `,"features":` + c.features
			}
			p, _, err := generatePrompt([]byte(body + `}`))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []uint32{1, 2, 3, 4}, p.TokenIDs)
			require.Equal(t, c.raw, p.RawMedia)
		})
	}
}

// A token-in request with raw media in content_parts reaches an engine
// unchanged, routed by load and counted under the router's
// kvroute_router_cache_blind_total{reason="raw_media"}; one without media
// parts is routed by its tokens.
func TestGenerateRawMediaRoutedByLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 2, Config{})
	defer h.close()
	body := `{"model":"m","token_ids":[1,2,3],"sampling_params":{},"content_parts":[{"type":"image_url","url":"https://x/a.png"}]}`
	resp := h.post(GeneratePath, body)
	got := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	require.Equal(t, 1.0, counterOf(t, h.reg, "kvroute_router_cache_blind_total", "reason", "raw_media"))
	resp = h.post(GeneratePath, `{"model":"m","token_ids":[1,2,3],"sampling_params":{},"content_parts":[{"type":"text","text":"x"}]}`)
	got = readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	require.Equal(t, 1.0, counterOf(t, h.reg, "kvroute_router_cache_blind_total", "reason", "raw_media"))
	var received int
	for _, u := range h.ups {
		bodies, _ := u.received()
		for _, b := range bodies {
			if string(b) == body {
				received++
			}
		}
	}
	require.Equal(t, 1, received, "forwarded unchanged")
}

// vLLM's GenerateRequest refuses a multimodal item given by its
// mm_metadata alone (its kwargs_data entry null, or no kwargs_data) unless
// ec_transfer_params, a non-empty object, says that the item's
// embeddings come through the encoder-cache connector, or requires_kv says
// they come as decoder KV. The gateway refuses it too, with a 400 counted
// as a bad request that reaches no engine, instead of routing it by keys
// no engine computes; every other combination is routed by its features.
func TestGenerateMetadataOnlyItemsNeedAnEncoderCacheTransfer(t *testing.T) {
	const places = `"mm_hashes":{"image":["a","b"]},"mm_placeholders":{"image":[{"offset":0,"length":2},{"offset":2,"length":2}]}`
	for _, c := range []struct {
		name, features, ec, err string
	}{
		{name: "metadata only, no transfer", features: `"mm_metadata":{"image":["m",null]}`, err: "metadata-only multimodal items require ec_transfer_params"},
		{name: "metadata only beside null kwargs", features: `"kwargs_data":{"image":["k",null]},"mm_metadata":{"image":[null,"m"]}`, err: "metadata-only"},
		{name: "null transfer", features: `"kwargs_data":null,"mm_metadata":{"image":["m","m"]}`, ec: `null`, err: "metadata-only"},
		{name: "empty transfer", features: `"mm_metadata":{"image":["m",null]}`, ec: `{ }`, err: "metadata-only"},
		{name: "requires_kv false", features: `"mm_metadata":{"image":["m",null]},"requires_kv":false`, err: "metadata-only"},
		{name: "transfer not an object", features: `"mm_metadata":{"image":["m",null]}`, ec: `[1]`, err: "ec_transfer_params must be an object or null"},
		{name: "transfer not an object, no features", ec: `"x"`, err: "ec_transfer_params must be an object or null"},
		{name: "metadata with its kwargs", features: `"kwargs_data":{"image":["k","k"]},"mm_metadata":{"image":["m",null]}`},
		{name: "no metadata", features: `"kwargs_data":{"image":[null,null]},"mm_metadata":{"image":[null,null]}`},
		{name: "metadata only, with a transfer", features: `"mm_metadata":{"image":["m","m"]}`, ec: `{"engine_id":"e"}`},
		{name: "metadata only, decoder KV", features: `"mm_metadata":{"image":["m","m"]},"requires_kv":true,` +
			`"kv_handoff":{"version":1,"model_fingerprint":"model-a","position_state":"sequence"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"token_ids":[1,2,3,4,5]`
			if c.features != "" {
				body += `,"features":{` + places + `,` + c.features + `}`
			}
			if c.ec != "" {
				body += `,"ec_transfer_params":` + c.ec
			}
			p, _, err := generatePrompt([]byte(body + `}`))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			if c.features != "" {
				require.Len(t, p.Features, 2)
			}
		})
	}

	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	resp := h.post(GeneratePath, `{"model":"m","token_ids":[1,2,3],"sampling_params":{},"features":{"mm_hashes":{"image":["a"]},`+
		`"mm_placeholders":{"image":[{"offset":0,"length":2}]},"mm_metadata":{"image":["m"]}}}`)
	got := readAll(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, got)
	require.Contains(t, got, "metadata-only multimodal items require ec_transfer_params")
	require.Equal(t, 1.0, counter(t, h.reg, string(apiGenerate), ResultBadRequest))
	bodies, _ := h.ups[0].received()
	require.Empty(t, bodies)
}

// vLLM's features may say that their items come as decoder KV handed over
// from another engine (requires_kv, a strict boolean), which vLLM admits
// only with kv_handoff's compatibility information (version 1, a
// non-empty model_fingerprint, position_state "sequence"), at least one
// hash, no empty hash list or hash, and no serialized tensors. The gateway
// refuses what vLLM refuses instead of routing it by keys no engine
// computes, and routes the rest (which also needs no encoder-cache
// transfer for metadata-only items).
func TestGeneratePromptDecoderKVFeaturesAsVLLM(t *testing.T) {
	const (
		places  = `"mm_placeholders":{"image":[{"offset":0,"length":2}]}`
		handoff = `"kv_handoff":{"version":1,"model_fingerprint":"model-a","position_state":"sequence"}`
	)
	for _, c := range []struct {
		name, features, err string
	}{
		{"no handoff", `"mm_hashes":{"image":["a"]},` + places + `,"requires_kv":true`, "requires_kv requires kv_handoff"},
		{"null handoff", `"mm_hashes":{"image":["a"]},` + places + `,"requires_kv":true,"kv_handoff":null`, "requires_kv requires kv_handoff"},
		{"empty hash", `"mm_hashes":{"image":[""]},` + places + `,"requires_kv":true,` + handoff, "requires_kv requires nonempty multimodal hashes"},
		{"no hashes", `"mm_hashes":{},"mm_placeholders":{},"requires_kv":true,` + handoff, "requires_kv requires nonempty multimodal hashes"},
		{"an empty list", `"mm_hashes":{"image":["a"],"audio":[]},"mm_placeholders":{"image":[{"offset":0,"length":2}],"audio":[]},"requires_kv":true,` + handoff, "requires_kv requires nonempty multimodal hashes"},
		{"tensors", `"mm_hashes":{"image":["a"]},` + places + `,"kwargs_data":{"image":["k"]},"requires_kv":true,` + handoff, "requires_kv does not accept full kwargs_data"},
		{"null requires_kv", `"mm_hashes":{"image":["a"]},` + places + `,"requires_kv":null`, "requires_kv: null"},
		{"string requires_kv", `"mm_hashes":{"image":["a"]},` + places + `,"requires_kv":"true"`, "requires_kv"},
		{"handoff version 2", `"mm_hashes":{"image":["a"]},` + places + `,"requires_kv":true,"kv_handoff":{"version":2,"model_fingerprint":"m","position_state":"sequence"}`, "kv_handoff.version must be 1"},
		{"handoff without fingerprint", `"mm_hashes":{"image":["a"]},` + places + `,"kv_handoff":{"version":1,"position_state":"sequence"}`, "model_fingerprint must be a non-empty string"},
		{"handoff empty fingerprint", `"mm_hashes":{"image":["a"]},` + places + `,"kv_handoff":{"version":1,"model_fingerprint":"","position_state":"sequence"}`, "model_fingerprint must be a non-empty string"},
		{"handoff mrope", `"mm_hashes":{"image":["a"]},` + places + `,"kv_handoff":{"version":1,"model_fingerprint":"m","position_state":"mrope"}`, `position_state must be "sequence"`},
		{"handoff not an object", `"mm_hashes":{"image":["a"]},` + places + `,"kv_handoff":[1]`, "kv_handoff"},
		{"accepted", `"mm_hashes":{"image":["a"]},` + places + `,"kwargs_data":{"image":[null]},"mm_metadata":{"image":["m"]},"requires_kv":true,` + handoff, ""},
		{"handoff without requires_kv", `"mm_hashes":{"image":["a"]},` + places + `,` + handoff, ""},
		{"requires_kv false", `"mm_hashes":{"image":[""]},` + places + `,"requires_kv":false`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _, err := generatePrompt([]byte(generateBody(4, `{`+c.features+`}`)))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, p.Features, 1)
		})
	}
}
