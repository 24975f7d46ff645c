package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// An engine started with --enable-tower-connector-lora identifies an image
// of a request with an adapter as "lora_name:mm_hash" in its blocks' keys;
// a router set with enableTowerConnectorLoRA keys the request the same way
// from the bare mm_hash its features carry. The index then holds the
// engine's blocks of the adapter's prompt with its image under the keys
// the router computes, and the engine reuses exactly what the index says.
func TestGatewayKeysAnAdaptersImagesAsATowerConnectorEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	id := ln.Addr().String()
	replay := "tcp://127.0.0.1:0"
	srv, err := server.New(server.Config{Model: testModel, LoRAModules: []string{"sql"}, EnableScaleOut: true, EnableTowerConnectorLoRA: true,
		Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + testModel}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	eps := []kvroute.Endpoint{{ID: id, EventsAddress: srv.KVEventsEndpoint(), ReplayAddress: srv.ReplayEndpoint()}}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Speculative.Enabled = new(false)
	cfg.EnableTowerConnectorLoRA = true
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps}, Options{})
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	defer func() {
		client.CloseIdleConnections()
		require.NoError(t, gw.Shutdown(context.Background()))
		require.NoError(t, srv.Close())
		<-served
	}()

	const n, imgOff, imgLen = 300, 70, 100 // 4 full blocks; the image on blocks 1 and 2
	tokens := make([]uint32, n)
	ids := make([]string, n)
	for i := range tokens {
		tokens[i] = uint32(i + 1)
		ids[i] = strconv.Itoa(i + 1)
	}
	direct := func(model, img string) int {
		t.Helper()
		body := `{"model":"` + model + `","token_ids":[` + strings.Join(ids, ",") + `],"sampling_params":{"max_tokens":1},` +
			`"features":{"mm_hashes":{"image":["` + img + `"]},"mm_placeholders":{"image":[{"offset":` +
			strconv.Itoa(imgOff) + `,"length":` + strconv.Itoa(imgLen) + `}]}}}`
		resp, err := client.Post("http://"+id+GeneratePath, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		b := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		return usageCached(t, b)
	}
	held := func(lora, img string) int {
		t.Helper()
		p := render.Prompt{TokenIDs: tokens, Features: []render.MMFeature{{Modality: "image", Hash: img, Offset: imgOff, Length: imgLen}}}
		sel, err := gw.Router().Match(context.Background(), &kvroute.Request{API: apiGenerate, LoRA: lora, Prompts: []render.Prompt{p}}, eps)
		require.NoError(t, err)
		defer sel.Release()
		return sel.Candidate(0).Match.Blocks
	}

	require.Zero(t, direct("sql", "cat"))
	require.Eventually(t, func() bool { return held("sql", "cat") == 4 }, time.Minute, 10*time.Millisecond,
		"the adapter's 4 blocks with its image indexed under the router's keys")
	require.Equal(t, 1, held("sql", "dog"), "another image: the block before it")
	require.Zero(t, held("", "cat"), "the base model's keys are not the adapter's")
	// The engine reuses what the index holds.
	require.Equal(t, 4*64, direct("sql", "cat"))
	require.Equal(t, 64, direct("sql", "dog"))
}
