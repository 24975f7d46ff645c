package simengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A step longer than a time.Duration holds (a slow model at a large
// TimeScale, a LoRA load of hours) lasts the longest Duration: the step
// ends after it starts. Before, the float product was converted past
// int64's range, which gave a negative duration on amd64: the step ended
// before it began, so the slowest configured engine ran every request at
// once.
func TestStepDurationSaturates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"decode step": {DecodeStep: 1000 * time.Hour, TimeScale: 1e4},
		"prefill":     {PrefillTokensPerSecond: 1e-10},
		"lora load":   {LoRA: &LoRAConfig{LoadTime: 1000 * time.Hour}, TimeScale: 1e4},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := New(cfg, Options{})
			require.NoError(t, err)
			defer e.Close()
			_, err = e.Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 1, LoRAName: map[bool]string{true: "a"}[cfg.LoRA != nil]})
			require.NoError(t, err)
			start := e.Now()
			e.AdvanceTo(start)
			end, ok := e.NextEventTime()
			require.True(t, ok)
			require.True(t, end.After(start), "the step ends after it starts (ends %v, started %v)", end, start)
			require.Equal(t, uint64(0), e.Stats().RequestSuccess, "a step of centuries has not ended yet")
		})
	}
}
