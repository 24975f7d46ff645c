package admission

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigIsStrict(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{"objectives":[{"name":"chat","priority":1,"queueTimeout":"5s"}],
		"fairness":"deficit_round_robin","recheck":"20ms","saturation":{"maxPrefillBacklog":"1500ms"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Objectives[0].QueueTimeout != 5*time.Second || cfg.Recheck != 20*time.Millisecond ||
		cfg.Saturation.MaxPrefillBacklog != 1500*time.Millisecond || cfg.Fairness != DeficitRoundRobin {
		t.Fatalf("decoded %+v", cfg)
	}
	for _, bad := range []string{
		`{"recheck":20}`,                             // a bare number as a duration
		`{"objectivez":[]}`,                          // an unknown key
		`{"saturation":{"maxOpen":1}}`,               // an unknown nested key
		`{"fairness":"lottery"}`,                     // an unknown policy
		`{"objectives":[{"name":""}]}`,               // an empty name
		`{"objectives":[{"name":"a"},{"name":"a"}]}`, // a duplicate
		`{"maxQueuedRequests":-1}`,
	} {
		if _, err := LoadConfig(strings.NewReader(bad)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestZeroConfigTakesTheDefaults(t *testing.T) {
	c, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := c.Config()
	if got.QueueTimeout != DefaultQueueTimeout || got.MaxQueuedRequests != DefaultMaxQueuedRequests ||
		got.Fairness != RoundRobin || got.Ordering != FCFS || got.DefaultFlow != DefaultFlow {
		t.Fatalf("defaults not applied: %+v", got)
	}
}

// A nil engine detector is refused by New, naming its position, instead of
// panicking on the first request that needs a saturation check.
func TestNewRefusesANilDetector(t *testing.T) {
	_, err := New(Config{}, Options{Detectors: []Detector{newSwitch(), nil}})
	if err == nil || !strings.Contains(err.Error(), "Detectors[1]") {
		t.Fatalf("New with a nil Detectors[1]: %v, want an error naming Detectors[1]", err)
	}
}
