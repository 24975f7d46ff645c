package kvroute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// vllmLoRAFingerprint is vLLM's sha256_cbor(lora_path).hex() for a path of
// fewer than 256 bytes, from the CBOR rules written out: a text string of n
// bytes is the head 0x60|n below 24, else 0x78 then n, then the bytes.
func vllmLoRAFingerprint(path string) string {
	head := []byte{0x60 | byte(len(path))}
	if len(path) >= 24 {
		head = []byte{0x78, byte(len(path))}
	}
	sum := sha256.Sum256(append(head, path...))
	return hex.EncodeToString(sum[:])
}

// engineKeys are the keys of an engine's blocks as the index computes them
// from a BlockStored event (kvindex.ChainKey): root lora (or model), and as
// the extra keys of each block the identifiers of the items overlapping it,
// which is what vLLM's _gen_mm_extra_hash_keys puts there.
func engineKeys(root string, tokens []uint32, bs int, items []render.MMFeature, ident func(hash string) string) []kvindex.Key {
	var keys []kvindex.Key
	parent := kvindex.RootKey(root)
	for start := 0; start+bs <= len(tokens); start += bs {
		var extra []string
		for _, it := range items {
			if it.Offset < start+bs && it.Offset+it.Length > start {
				extra = append(extra, ident(it.Hash))
			}
		}
		parent = kvindex.ChainKey(parent, tokens[start:start+bs], extra)
		keys = append(keys, parent)
	}
	return keys
}

// A request's multimodal items are keyed by the identifier the engine gives
// them: with EnableTowerConnectorLoRA, vLLM's _get_mm_identifier puts the
// adapter's name (and, for an adapter of TowerConnectorLoRAPaths, its path's
// fingerprint) before the mm_hash of every item of a LoRA request; without
// it, or without an adapter, the keys are those of the bare mm_hash.
func TestTowerConnectorLoRAKeysItemsByTheEnginesIdentifier(t *testing.T) {
	const bs = 16
	toks := prompt(7, 4*bs)
	items := []render.MMFeature{
		{Modality: "image", Hash: "img-a", Offset: 10, Length: 12}, // blocks 0 and 1
		{Modality: "image", Hash: "img-b", Offset: 48, Length: 16}, // block 3
	}
	shortPath, longPath := "/adapters/a", "/mnt/models/adapters/vision-b"
	require.Less(t, len(shortPath), 24)
	require.GreaterOrEqual(t, len(longPath), 24)
	paths := map[string]string{"ad-short": shortPath, "ad-long": longPath}
	raw := func(h string) string { return h }
	named := func(name string) func(string) string { return func(h string) string { return name + ":" + h } }
	fingerprinted := func(name, path string) func(string) string {
		return func(h string) string { return name + ":" + vllmLoRAFingerprint(path) + ":" + h }
	}
	cases := []struct {
		name  string
		on    bool
		paths map[string]string
		lora  string
		root  string
		ident func(string) string
	}{
		{"off, base model", false, nil, "", testModel, raw},
		{"off, adapter: the bare mm_hash", false, nil, "ad", "ad", raw},
		{"on, base model: the bare mm_hash", true, nil, "", testModel, raw},
		{"on, adapter: lora_name:mm_hash", true, nil, "ad", "ad", named("ad")},
		{"on with paths, short path", true, paths, "ad-short", "ad-short", fingerprinted("ad-short", shortPath)},
		{"on with paths, long path", true, paths, "ad-long", "ad-long", fingerprinted("ad-long", longPath)},
		{"on with paths, adapter not listed: lora_name:mm_hash", true, paths, "ad", "ad", named("ad")},
		{"on with paths, base model", true, paths, "", testModel, raw},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := testRouter(t, func(cfg *Config) {
				cfg.BlockSize = bs
				cfg.EnableTowerConnectorLoRA = c.on
				cfg.TowerConnectorLoRAPaths = c.paths
			}, Options{})
			eps := endpoints(1)
			req := &Request{LoRA: c.lora, Prompts: []render.Prompt{{TokenIDs: toks, Features: items}}}
			s, err := r.Match(context.Background(), req, eps)
			require.NoError(t, err)
			defer s.Release()
			want := engineKeys(c.root, toks, bs, items, c.ident)
			require.Equal(t, want, stages{r}.Keys(s))
			if c.on && c.lora != "" {
				require.NotEqual(t, engineKeys(c.root, toks, bs, items, raw), want, "the identifier changes the keys")
			}
		})
	}
}

// The router's keys meet the index's keys of the engine's BlockStored
// event: an endpoint holding a LoRA request's blocks, announced with the
// prefixed identifiers a vLLM engine with --enable-tower-connector-lora
// sends, matches the request in full once the router is configured so, and
// not past the first image without it.
func TestTowerConnectorLoRARequestMatchesTheEnginesBlocks(t *testing.T) {
	const bs = 16
	toks := prompt(9, 4*bs)
	items := []render.MMFeature{{Modality: "image", Hash: "img", Offset: 20, Length: 30}} // blocks 1-3
	ident := "ad:" + vllmLoRAFingerprint("/adapters/ad") + ":img"
	extra := [][]string{nil, {ident}, {ident}, {ident}}
	for _, on := range []bool{false, true} {
		r := testRouter(t, func(cfg *Config) {
			cfg.BlockSize = bs
			cfg.EnableTowerConnectorLoRA = on
			if on {
				cfg.TowerConnectorLoRAPaths = map[string]string{"ad": "/adapters/ad"}
			}
		}, Options{})
		eps := endpoints(1)
		require.NoError(t, r.Index().Store(eps[0].ID, &kvindex.StoreEvent{
			EngineHashes: []uint64{1, 2, 3, 4}, Tokens: toks, BlockSize: bs, Model: "ad", ExtraKeys: extra, Group: -1,
		}))
		s, err := r.Match(context.Background(), &Request{LoRA: "ad", Prompts: []render.Prompt{{TokenIDs: toks, Features: items}}}, eps)
		require.NoError(t, err)
		want := 1 // block 0 has no item
		if on {
			want = 4
		}
		require.Equal(t, want, s.Candidate(0).Match.Blocks, "enableTowerConnectorLoRA=%v", on)
		s.Release()
	}
}

// The fingerprint is vLLM's sha256_cbor of the path as a text string, at
// every CBOR head size; the vector is vLLM's NONE_HASH, sha256_cbor of the
// seed "vllm-none-hash".
func TestLoRAFingerprintIsSHA256CBOROfThePath(t *testing.T) {
	require.Equal(t, "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0",
		loraFingerprints(map[string]string{"a": "vllm-none-hash"})["a"])
	for _, n := range []int{1, 23, 24, 255} {
		p := strings.Repeat("p", n)
		require.Equal(t, vllmLoRAFingerprint(p), loraFingerprints(map[string]string{"a": p})["a"], "%d bytes", n)
	}
	for n, head := range map[int]string{256: "790100", 65535: "79ffff", 65536: "7a00010000"} {
		p := strings.Repeat("p", n)
		h, _ := hex.DecodeString(head)
		sum := sha256.Sum256(append(h, p...))
		require.Equal(t, hex.EncodeToString(sum[:]), loraFingerprints(map[string]string{"a": p})["a"], "%d bytes", n)
	}
	require.Nil(t, loraFingerprints(nil))
}

// The settings load from JSON under their names, off by default, and a
// path map that would key nothing, or names an empty adapter or path, is
// refused.
func TestTowerConnectorLoRAConfig(t *testing.T) {
	require.False(t, DefaultConfig().EnableTowerConnectorLoRA)
	require.Empty(t, DefaultConfig().TowerConnectorLoRAPaths)
	c, err := LoadConfig(strings.NewReader(`{"model":"m","enableTowerConnectorLoRA":true,"towerConnectorLoRAPaths":{"ad":"/adapters/ad"}}`))
	require.NoError(t, err)
	require.True(t, c.EnableTowerConnectorLoRA)
	require.Equal(t, map[string]string{"ad": "/adapters/ad"}, c.TowerConnectorLoRAPaths)
	for doc, msg := range map[string]string{
		`{"towerConnectorLoRAPaths":{"ad":"/p"}}`:                                "without enableTowerConnectorLoRA",
		`{"enableTowerConnectorLoRA":true,"towerConnectorLoRAPaths":{"":"/p"}}`:  "must be non-empty",
		`{"enableTowerConnectorLoRA":true,"towerConnectorLoRAPaths":{"ad":""}}`:  "must be non-empty",
		`{"enableTowerConnectorLoRA":true,"towerConnectorLoRAPath":{"ad":"/p"}}`: "towerConnectorLoRAPath",
	} {
		_, err := LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg, doc)
	}
}

// A Selection keys a LoRA request's items without allocating once its
// scratch has grown, prefix included.
func TestTowerConnectorLoRAKeysDoNotAllocate(t *testing.T) {
	r := testRouter(t, func(cfg *Config) {
		cfg.EnableTowerConnectorLoRA = true
		cfg.TowerConnectorLoRAPaths = map[string]string{"ad": "/adapters/ad"}
	}, Options{})
	eps := endpoints(1)
	items := []render.MMFeature{{Modality: "image", Hash: "img", Offset: 20, Length: 300}}
	for _, lora := range []string{"ad", "other"} {
		req := &Request{LoRA: lora, Prompts: []render.Prompt{{TokenIDs: prompt(3, 512), Features: items}}}
		s, err := r.Match(context.Background(), req, eps)
		require.NoError(t, err)
		s.keys() // grows the scratch
		allocs := testing.AllocsPerRun(50, func() {
			s.st.keys, s.st.bounds, s.total, s.promptTokens = s.st.keys[:0], s.st.bounds[:0], 0, 0
			s.keys()
		})
		require.Zero(t, allocs, lora)
		s.Release()
	}
}
