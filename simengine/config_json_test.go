package simengine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
)

// The engine's Config decodes as every kvroute configuration, wherever it
// is decoded, nested parts included: a duration string works, and a bare
// number (encoding/json's nanoseconds), an unknown key and a key in another
// case are errors naming the key's path. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	good := Config{Model: "m", DecodeStep: 10 * time.Millisecond, LoRA: &LoRAConfig{MaxLoRAs: 2, LoadTime: 100 * time.Millisecond}}
	require.NoError(t, conftest.Check(Config{}, []conftest.Case[Config]{
		{Doc: `{"model":"m","decodeStep":"10ms","lora":{"maxLoras":2,"loadTime":"100ms"}}`, Want: func(c *Config) { *c = good }},
		{Doc: `{"decodeStep":10000000}`, Err: "decodeStep: bare number"},
		{Doc: `{"lora":{"loadTime":100}}`, Err: "lora.loadTime: bare number"},
		{Doc: `{"decodeStpe":"10ms"}`, Err: "decodeStpe: unknown key"},
		{Doc: `{"BlockSize":16}`, Err: "BlockSize: unknown key"},
		{Doc: `{"blockSize":16,"blockSize":32}`, Err: "blockSize"},
	}, good, `"decodeStep":"10ms"`))
}

// A HybridConfig and a LoRAConfig decode by kvroute's configuration rules
// on their own, not only inside a Config: a key in another case, a key
// given twice and an unknown key are errors naming the key, a duration is a
// duration string, keys not present keep the value they had, and what
// Marshal writes decodes back.
func TestPartConfigsDecodeStrictly(t *testing.T) {
	hybrid := HybridConfig{SlidingWindow: 4096, WindowBlocks: 100, MambaStates: 50}
	require.NoError(t, conftest.Check(hybrid, []conftest.Case[HybridConfig]{
		{Name: "case variant", Doc: `{"SlidingWindow":8}`, Err: `SlidingWindow: unknown key (did you mean "slidingWindow"?`},
		{Name: "repeated key", Doc: `{"mamba":true,"mamba":false}`, Err: "mamba: key given twice"},
		{Name: "unknown key", Doc: `{"windowBlock":8}`, Err: "windowBlock: unknown key"},
		{Name: "wrong kind", Doc: `{"windowBlocks":"250ms"}`, Err: "windowBlocks: want a number"},
		{Name: "absent keys keep defaults", Doc: `{"mamba":true}`, Want: func(c *HybridConfig) { c.Mamba = true }},
	}, HybridConfig{SlidingWindow: 8, WindowBlocks: 3, Mamba: true, MambaStates: 2}))

	lora := LoRAConfig{MaxLoRAs: DefaultMaxLoRAs, LoadTime: DefaultLoRALoadTime}
	l := LoRAConfig{MaxLoRAs: 3, LoadTime: 1500 * time.Millisecond}
	require.NoError(t, conftest.Check(lora, []conftest.Case[LoRAConfig]{
		{Name: "case variant", Doc: `{"maxLoRAs":2}`, Err: `maxLoRAs: unknown key (did you mean "maxLoras"?`},
		{Name: "repeated key", Doc: `{"maxLoras":2,"maxLoras":3}`, Err: "maxLoras: key given twice"},
		{Name: "unknown key", Doc: `{"loadTimes":"1s"}`, Err: "loadTimes: unknown key"},
		{Name: "bare number", Doc: `{"loadTime":250}`, Err: "loadTime: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"loadTime":"250ms"}`, Want: func(c *LoRAConfig) { c.LoadTime = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{"maxLoras":4}`, Want: func(c *LoRAConfig) { c.MaxLoRAs = 4 }},
	}, l))
	out, err := json.Marshal(l)
	require.NoError(t, err)
	require.JSONEq(t, `{"maxLoras":3,"loadTime":"1.5s"}`, string(out))
}
