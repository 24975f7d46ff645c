package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/simengine"
)

// The adapter writes exactly vLLM's bytes: the golden BlockStored,
// BlockRemoved and AllBlocksCleared payloads (V1, V3, V4) in both layouts,
// from engine events with the same content.
func TestAdapterReproducesWireVectors(t *testing.T) {
	ts := time.Unix(1700000000, 500_000_000)
	const h1, h2 = 0x8A3F1C2D4E5B6A79, 0x1122334455667788
	cases := []struct {
		name            string
		ev              simengine.Event
		current, legacy string
	}{
		{"V1", simengine.Event{Type: simengine.BlockStored, BlockHashes: []uint64{h1, h2}, TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8},
			BlockSize: 4, Medium: simengine.MediumGPU, ExtraKeys: [][]simengine.ExtraKey{nil, nil}, Kind: simengine.KindFullAttention},
			"93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00",
			"93cb41d954fc40200000919cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788c098010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec000"},
		{"V3", simengine.Event{Type: simengine.BlockRemoved, BlockHashes: []uint64{h1}, Medium: simengine.MediumGPU},
			"93cb41d954fc402000009184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf8a3f1c2d4e5b6a79a66d656469756da3475055a967726f75705f6964780000",
			"93cb41d954fc402000009194ac426c6f636b52656d6f76656491cf8a3f1c2d4e5b6a79a34750550000"},
		{"V4", simengine.Event{Type: simengine.AllBlocksCleared},
			"93cb41d954fc402000009181a474797065b0416c6c426c6f636b73436c656172656400",
			"93cb41d954fc402000009191b0416c6c426c6f636b73436c656172656400"},
	}
	var b wire.Batch
	for _, c := range cases {
		ToKVEventsBatch(&b, simengine.EventBatch{Time: ts, Events: []simengine.Event{c.ev}})
		require.Equal(t, c.current, hex.EncodeToString(wire.AppendBatch(nil, &b, wire.FormatVLLM)), c.name)
		require.Equal(t, c.legacy, hex.EncodeToString(wire.AppendBatch(nil, &b, wire.FormatVLLMLegacy)), c.name)
	}
}

// replayAll fetches every published batch from the replay socket and decodes it.
func replayAll(t *testing.T, addr string) []wire.Event {
	t.Helper()
	c, err := replay.NewClient(replay.ClientConfig{Timeout: 10 * time.Second}, replay.Options{})
	require.NoError(t, err)
	dec := wire.NewDecoder(wire.Limits{})
	var out []wire.Event
	_, err = c.Replay(context.Background(), addr, 0, func(_ uint64, payload []byte) error {
		var b wire.Batch
		if err := dec.Decode(payload, &b); err != nil {
			return err
		}
		for _, e := range b.Events {
			e.BlockHashes = append([]uint64(nil), e.BlockHashes...)
			e.TokenIDs = append([]uint32(nil), e.TokenIDs...)
			out = append(out, e)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// The engine's events decode through kvevents into the events vLLM would
// have sent, in the current and the legacy layout.
func TestEventsDecodeThroughKVEvents(t *testing.T) {
	for _, format := range []string{"current", "legacy"} {
		t.Run(format, func(t *testing.T) {
			kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:0","replay_endpoint":"tcp://127.0.0.1:0","topic":"kv@sim@m"}`)
			require.NoError(t, err)
			cfg := Config{EnableScaleOut: true, KVEvents: kv, KVEventsFormat: format, Engine: fastEngine()}
			cfg.Engine.NumGPUBlocks = 5
			s, base := startServer(t, cfg)
			require.Equal(t, "kv@sim@m", s.Publisher().Topic())

			code, out := post(t, base+"/v1/completions", map[string]any{"prompt": []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, "max_tokens": 1})
			require.Equal(t, http.StatusOK, code, string(out))
			// A prefix hit publishes nothing; a second, different prompt needs
			// blocks and evicts (removal and store share that step's batch); a
			// reset clears: three batches in all.
			code, _ = post(t, base+"/v1/completions", map[string]any{"prompt": []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, "max_tokens": 1})
			require.Equal(t, http.StatusOK, code)
			code, _ = post(t, base+"/v1/completions", map[string]any{"prompt": []int{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, "max_tokens": 1})
			require.Equal(t, http.StatusOK, code)
			code, _ = post(t, base+"/reset_prefix_cache", map[string]any{})
			require.Equal(t, http.StatusOK, code)
			require.Eventually(t, func() bool { return s.Publisher().Stats().Published == 3 }, 10*time.Second, 5*time.Millisecond, "published %d", s.Publisher().Stats().Published)

			evs := replayAll(t, s.ReplayEndpoint())
			var types []wire.EventType
			for _, e := range evs {
				types = append(types, e.Type)
			}
			require.Equal(t, []wire.EventType{wire.EventBlockStored, wire.EventBlockRemoved,
				wire.EventBlockStored, wire.EventAllBlocksCleared}, types)

			first := evs[0]
			require.Equal(t, []uint64{9561501211280363793, 15292913576410714033}, first.BlockHashes, "vLLM's sha256_cbor hashes of blocks [1,2,3,4] and [5,6,7,8]")
			require.False(t, first.HasParent)
			require.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8}, first.TokenIDs)
			require.Equal(t, 4, first.BlockSize)
			require.Equal(t, "GPU", first.Medium)
			require.False(t, first.HasLoRAID)
			require.Len(t, first.ExtraKeys, 2)
			require.True(t, first.HasGroup)
			require.Equal(t, 0, first.Group)
			require.Equal(t, "full_attention", first.Kind)

			// 5 blocks: the third prompt takes the 3 blocks that hold no hash, then the least
			// recently freed cached block (block 1 of the first prompt).
			require.Equal(t, []uint64{15292913576410714033}, evs[1].BlockHashes)
			require.Equal(t, "GPU", evs[1].Medium)
			require.Len(t, evs[2].BlockHashes, 3)
		})
	}
}

func TestParseKVEventsConfig(t *testing.T) {
	c, err := ParseKVEventsConfig("")
	require.NoError(t, err)
	require.False(t, c.Active())

	c, err = ParseKVEventsConfig(`{"enable_kv_cache_events":true}`)
	require.NoError(t, err)
	require.True(t, c.Active(), "newer vLLM: publisher defaults to zmq when enabled")

	c, err = ParseKVEventsConfig(`{"enable_kv_cache_events":true,"publisher":"null","hwm":5,"max_queue_size":7,"buffer_steps":3}`)
	require.NoError(t, err)
	require.False(t, c.Active())

	for _, bad := range []string{
		`{"enable_kv_cache_events":true,"endpont":"tcp://*:1"}`,
		`{"publisher":"kafka"}`,
		`{"buffer_steps":-1}`,
		`{"enable_kv_cache_events":"yes"}`,
		`{} {}`,
		`not json`,
	} {
		_, err := ParseKVEventsConfig(bad)
		require.ErrorIs(t, err, ErrBadKVEventsConfig, bad)
	}
	_, err = ParseEventFormat("sglang")
	require.Error(t, err)
	_, err = New(Config{Model: "m", KVEventsFormat: "xml"}, Options{})
	require.Error(t, err)
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	defer leakcheck.Check(t)()
	kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"tcp://127.0.0.1:0","replay_endpoint":"tcp://127.0.0.1:0"}`)
	require.NoError(t, err)
	s, err := New(Config{Model: "m", KVEvents: kv, Engine: fastEngine()}, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	base := "http://" + s.Addr()
	code, _ := post(t, base+"/v1/chat/completions", chatBody("hello", 3))
	require.Equal(t, http.StatusOK, code)
	require.NotEmpty(t, replayAll(t, s.ReplayEndpoint()))
	testClient.CloseIdleConnections()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
}

func TestCloseAbortsInFlightStream(t *testing.T) {
	defer leakcheck.Check(t)()
	s, err := New(Config{Model: "m", Engine: fastEngine()}, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	body := chatBody("never finishes in time", 2000)
	body["stream"] = true
	b, _ := json.Marshal(body)
	got := make(chan string, 1)
	go func() {
		resp, err := testClient.Post("http://"+s.Addr()+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		all, _ := io.ReadAll(resp.Body)
		got <- string(all)
	}()
	require.Eventually(t, func() bool { return s.Engine().Stats().Running == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, s.Close())
	select {
	case out := <-got:
		require.Contains(t, out, "shutting down", "the stream ends with an error chunk")
	case <-time.After(10 * time.Second):
		t.Fatal("stream not ended by Close")
	}
	testClient.CloseIdleConnections()
}
