package simengine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The engine's Config decodes as every kvroute configuration, wherever it
// is decoded, nested parts included: a duration string works, and a bare
// number (encoding/json's nanoseconds), an unknown key and a key in another
// case are errors naming the key's path. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","decodeStep":"10ms","lora":{"maxLoras":2,"loadTime":"100ms"}}`), &c))
	require.Equal(t, Config{Model: "m", DecodeStep: 10 * time.Millisecond, LoRA: &LoRAConfig{MaxLoRAs: 2, LoadTime: 100 * time.Millisecond}}, c)

	for doc, want := range map[string]string{
		`{"decodeStep":10000000}`:         "decodeStep: bare number",
		`{"lora":{"loadTime":100}}`:       "lora.loadTime: bare number",
		`{"decodeStpe":"10ms"}`:           "decodeStpe: unknown key",
		`{"BlockSize":16}`:                "BlockSize: unknown key",
		`{"blockSize":16,"blockSize":32}`: "blockSize",
	} {
		var bad Config
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &bad), want, doc)
	}

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"decodeStep":"10ms"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, c, back)
}

// A HybridConfig and a LoRAConfig decode by kvroute's configuration rules
// on their own, not only inside a Config: a key in another case, a key
// given twice and an unknown key are errors naming the key, a duration is a
// duration string, keys not present keep the value they had, and what
// Marshal writes decodes back.
func TestPartConfigsDecodeStrictly(t *testing.T) {
	hybrid := HybridConfig{SlidingWindow: 4096, WindowBlocks: 100, MambaStates: 50}
	lora := LoRAConfig{MaxLoRAs: DefaultMaxLoRAs, LoadTime: DefaultLoRALoadTime}
	for _, tc := range []struct {
		name, doc, err string
		into, want     any
	}{
		{name: "hybrid case variant", doc: `{"SlidingWindow":8}`, into: &hybrid, err: `SlidingWindow: unknown key (did you mean "slidingWindow"?`},
		{name: "hybrid repeated key", doc: `{"mamba":true,"mamba":false}`, into: &hybrid, err: "mamba: key given twice"},
		{name: "hybrid unknown key", doc: `{"windowBlock":8}`, into: &hybrid, err: "windowBlock: unknown key"},
		{name: "hybrid wrong kind", doc: `{"windowBlocks":"250ms"}`, into: &hybrid, err: "windowBlocks: want a number"},
		{name: "hybrid absent keys keep defaults", doc: `{"mamba":true}`, into: &hybrid,
			want: &HybridConfig{SlidingWindow: 4096, WindowBlocks: 100, Mamba: true, MambaStates: 50}},
		{name: "lora case variant", doc: `{"maxLoRAs":2}`, into: &lora, err: `maxLoRAs: unknown key (did you mean "maxLoras"?`},
		{name: "lora repeated key", doc: `{"maxLoras":2,"maxLoras":3}`, into: &lora, err: "maxLoras: key given twice"},
		{name: "lora unknown key", doc: `{"loadTimes":"1s"}`, into: &lora, err: "loadTimes: unknown key"},
		{name: "lora bare number", doc: `{"loadTime":250}`, into: &lora, err: "loadTime: bare number 250 is not a duration"},
		{name: "lora duration string", doc: `{"loadTime":"250ms"}`, into: &lora,
			want: &LoRAConfig{MaxLoRAs: DefaultMaxLoRAs, LoadTime: 250 * time.Millisecond}},
		{name: "lora absent keys keep defaults", doc: `{"maxLoras":4}`, into: &lora,
			want: &LoRAConfig{MaxLoRAs: 4, LoadTime: DefaultLoRALoadTime}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got any
			switch p := tc.into.(type) {
			case *HybridConfig:
				c := *p
				got = &c
			case *LoRAConfig:
				c := *p
				got = &c
			}
			err := json.Unmarshal([]byte(tc.doc), got)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	h := HybridConfig{SlidingWindow: 8, WindowBlocks: 3, Mamba: true, MambaStates: 2}
	out, err := json.Marshal(h)
	require.NoError(t, err)
	var hBack HybridConfig
	require.NoError(t, json.Unmarshal(out, &hBack))
	require.Equal(t, h, hBack)

	l := LoRAConfig{MaxLoRAs: 3, LoadTime: 1500 * time.Millisecond}
	out, err = json.Marshal(l)
	require.NoError(t, err)
	require.JSONEq(t, `{"maxLoras":3,"loadTime":"1.5s"}`, string(out))
	var lBack LoRAConfig
	require.NoError(t, json.Unmarshal(out, &lBack))
	require.Equal(t, l, lBack)
}
