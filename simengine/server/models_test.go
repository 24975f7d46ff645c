package server

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// A server with an extra model runs one engine per model: /v1/models lists
// both, each model's requests hit its own engine's cache, and every
// engine's batches go out through the one publisher under one sequence on
// the model's own topic (the replay buffer keeps the topics).
func TestExtraModelServedByItsOwnEngineAndTopic(t *testing.T) {
	rp := "tcp://127.0.0.1:0"
	s, url := startServer(t, Config{Model: "alpha", ExtraModels: []string{"beta"},
		KVEvents: KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &rp, Topic: "kv@10.0.0.1:8000@alpha"}})
	code, body := get(t, url+"/v1/models")
	require.Equal(t, http.StatusOK, code)
	list := decode[struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}](t, body)
	require.Len(t, list.Data, 2)
	require.Equal(t, "alpha", list.Data[0].ID)
	require.Equal(t, "beta", list.Data[1].ID)
	require.NotSame(t, s.ModelEngine("alpha"), s.ModelEngine("beta"))
	require.Nil(t, s.ModelEngine("gamma"))

	cached := func(model string) int {
		code, b := post(t, url+"/v1/completions", map[string]any{"model": model, "prompt": wordsText(300), "max_tokens": 1})
		require.Equal(t, http.StatusOK, code, string(b))
		return decode[struct {
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}](t, b).Usage.Details.Cached
	}
	require.Zero(t, cached("alpha"))
	require.Zero(t, cached("beta"), "beta's engine has its own cache")
	require.Positive(t, cached("beta"))
	code, _ = post(t, url+"/v1/completions", map[string]any{"model": "gamma", "prompt": "x", "max_tokens": 1})
	require.Equal(t, http.StatusNotFound, code)

	c, err := replay.NewClient(replay.ClientConfig{Timeout: 10 * time.Second}, replay.Options{})
	require.NoError(t, err)
	topics := map[string][]uint64{}
	var hashes = map[string][]uint64{}
	dec := wire.NewDecoder(wire.Limits{})
	_, err = c.ReplayBatches(context.Background(), s.ReplayEndpoint(), 0, func(b replay.Batch) error {
		topics[string(b.Topic)] = append(topics[string(b.Topic)], b.Seq)
		var wb wire.Batch
		if err := dec.Decode(b.Payload, &wb); err != nil {
			return err
		}
		for _, e := range wb.Events {
			if e.Type == wire.EventBlockStored {
				hashes[string(b.Topic)] = append(hashes[string(b.Topic)], e.BlockHashes...)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, map[string][]uint64{"kv@10.0.0.1:8000@alpha": {0}, "kv@10.0.0.1:8000@beta": {1}}, topics)
	require.Equal(t, hashes["kv@10.0.0.1:8000@alpha"], hashes["kv@10.0.0.1:8000@beta"],
		"two engines hash the same tokens alike, as two vLLM processes with sha256_cbor do")
}

func TestExtraModelsRefusedWhereNotModelled(t *testing.T) {
	for name, cfg := range map[string]Config{
		"repeated": {Model: "a", ExtraModels: []string{"b", "b"}},
		"base":     {Model: "a", ExtraModels: []string{"a"}},
		"adapter":  {Model: "a", LoRAModules: []string{"l"}, ExtraModels: []string{"l"}},
		"empty":    {Model: "a", ExtraModels: []string{""}},
		"pd":       {Model: "a", ExtraModels: []string{"b"}, PD: PDConfig{Role: RolePrefill}},
		"topic":    {Model: "a", ExtraModels: []string{"b"}, KVEvents: KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0", Topic: "kvtopic"}},
	} {
		cfg.Engine = fastEngine()
		_, err := New(cfg, Options{})
		require.Error(t, err, name)
	}
}

// wordsText is a prompt of n distinct words.
func wordsText(n int) string {
	b := make([]byte, 0, n*6)
	for i := range n {
		b = append(b, 'w')
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ' ')
	}
	return string(b)
}
