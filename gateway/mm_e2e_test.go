package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
)

// A multimodal token-in request end to end: the simulated engines key the
// blocks an image's placeholders overlap by its mm_hash as vLLM's engines
// do, and publish those keys in their KV events; the router indexes them
// and keys the request's own blocks the same way, so the same tokens with
// the same image go warm with the whole prefix, with another image (or
// none) only with the block before it, and every prediction equals what
// the engine reports it reused.
func TestGatewayRoutesMultimodalTokenInByTheEnginesBlocks(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSimFleet(t, 2, func(c *kvroute.Config) {
		c.Speculative.Enabled = new(false) // every hit comes from the engines' events
	})
	defer f.close(t)
	require.Eventually(t, func() bool { code, _ := f.get(t, "/ready"); return code == http.StatusOK }, time.Minute, 10*time.Millisecond)

	// 300 tokens: 4 full blocks of 64; an image on tokens 70–169 overlaps
	// blocks 1 and 2.
	const n, imgOff, imgLen = 300, 70, 100
	tokens := make([]uint32, n)
	ids := make([]string, n)
	for i := range tokens {
		tokens[i] = uint32(i + 1)
		ids[i] = strconv.Itoa(i + 1)
	}
	features := func(img string) string {
		if img == "" {
			return "null"
		}
		return `{"mm_hashes":{"image":["` + img + `"]},"mm_placeholders":{"image":[{"offset":` +
			strconv.Itoa(imgOff) + `,"length":` + strconv.Itoa(imgLen) + `}]}}`
	}
	body := func(img string) string {
		return `{"model":"` + testModel + `","token_ids":[` + strings.Join(ids, ",") +
			`],"sampling_params":{"max_tokens":1},"features":` + features(img) + `}`
	}
	held := func(img string) map[string]int {
		t.Helper()
		p := render.Prompt{TokenIDs: tokens}
		if img != "" {
			p.Features = []render.MMFeature{{Modality: "image", Hash: img, Offset: imgOff, Length: imgLen}}
		}
		sel, err := f.gw.Router().Match(context.Background(), &kvroute.Request{API: apiGenerate, Prompts: []render.Prompt{p}}, f.gw.Handler().Endpoints())
		require.NoError(t, err)
		defer sel.Release()
		out := map[string]int{}
		for i := range sel.Len() {
			c := sel.Candidate(i)
			out[c.Endpoint.ID] = c.Match.Blocks
		}
		return out
	}
	post := func(url, img string) (string, *http.Response) {
		t.Helper()
		resp, err := f.client.Post(url+GeneratePath, "application/json", strings.NewReader(body(img)))
		require.NoError(t, err)
		b := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		return b, resp
	}

	// Warm engine 1 directly with the cat picture.
	warm := f.eps[1].ID
	post("http://"+warm, "cat")
	require.Eventually(t, func() bool { return held("cat")[warm] == 4 }, time.Minute, 10*time.Millisecond,
		"the engine's 4 blocks of the prompt with its image indexed")
	require.Equal(t, 1, held("dog")[warm], "another image: only the block before it")
	require.Equal(t, 1, held("")[warm], "no image: the same")
	require.Zero(t, held("cat")[f.eps[0].ID])

	observed := 0
	send := func(img string) DecisionRecord {
		t.Helper()
		_, resp := post(f.gw.URL(), img)
		observed++
		require.Eventually(t, func() bool { return len(f.gw.Handler().Recent()) == observed }, time.Minute, time.Millisecond)
		d := f.gw.Handler().Recent()[0]
		require.Equal(t, resp.Header.Get(HeaderEndpoint), d.Endpoint)
		return d
	}
	d := send("cat")
	require.Equal(t, warm, d.Endpoint, "the same picture goes where it is cached")
	require.Equal(t, 4*64, d.PredictedCached)
	require.Equal(t, 4*64, d.ActualCached, "the engine reused the whole prefix")
	for _, img := range []string{"dog", ""} {
		d = send(img)
		require.Equal(t, d.ActualCached, d.PredictedCached, "image %q on %s: predicted as the engine reused", img, d.Endpoint)
		require.Zero(t, d.Error)
		if d.Endpoint == warm {
			require.Equal(t, 64, d.ActualCached, "image %q: the block before the image only", img)
		}
	}
}
