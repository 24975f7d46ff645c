package simengine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of LoRAConfig.
const (
	// DefaultMaxLoRAs is vLLM's --max-loras default: one adapter per batch.
	DefaultMaxLoRAs = 1
	// DefaultLoRALoadTime is how long activating an adapter stalls a step.
	DefaultLoRALoadTime = 50 * time.Millisecond
	// maxLoRASeries bounds the vllm:lora_requests_info series kept (vLLM
	// keeps every label combination it ever reported; the oldest go first
	// here).
	maxLoRASeries = 256
)

// LoRAConfig models vLLM's LoRA serving (--enable-lora): an engine has
// MaxLoRAs adapter slots (--max-loras); a batch uses at most that many
// distinct adapters, and a waiting request whose adapter would exceed them
// is skipped (it stays queued and requests behind it may go first, as in
// vLLM's scheduler). A request whose adapter is not in a slot loads it when
// it is admitted: the least recently used adapter no running request uses
// leaves its slot, and the step pays LoadTime (× TimeScale) for every
// adapter it loads, the synchronous weight copy that stalls vLLM's batch.
// A request so skipped is reported in vllm:num_requests_waiting_by_reason
// under reason "deferred" (vLLM's skipped_waiting queue), not "capacity".
// One tier is modelled: an evicted adapter costs a full load again (vLLM
// also keeps up to --max-cpu-loras adapters in host memory, from which a
// reload is cheaper than from disk).
type LoRAConfig struct {
	// MaxLoRAs is the number of adapter slots (default 1).
	MaxLoRAs int `json:"maxLoras"`
	// LoadTime is the cost of loading one adapter into a slot (default
	// 50ms).
	LoadTime time.Duration `json:"loadTime"`
}

func (c LoRAConfig) withDefaults() (LoRAConfig, error) {
	if c.MaxLoRAs == 0 {
		c.MaxLoRAs = DefaultMaxLoRAs
	}
	if c.LoadTime == 0 {
		c.LoadTime = DefaultLoRALoadTime
	}
	switch {
	case c.MaxLoRAs < 1 || c.MaxLoRAs > 1<<10:
		return c, fmt.Errorf("%w: lora.maxLoras %d not in [1, 1024]", ErrBadConfig, c.MaxLoRAs)
	case c.LoadTime < 0:
		return c, fmt.Errorf("%w: lora.loadTime %v < 0", ErrBadConfig, c.LoadTime)
	}
	return c, nil
}

// loraState is an engine's adapter slots and its lora_requests_info
// series; guarded by Engine.mu.
type loraState struct {
	cfg   LoRAConfig
	slots []string // loaded adapters, least recently used first
	batch []string // adapters of the step being scheduled
	loads int      // adapters loaded in the step being scheduled
	// skips counts the waiting requests the last admission pass skipped
	// because their adapter found no slot (fits false): vLLM moves them to
	// its skipped_waiting queue, reported as vllm:num_requests_waiting_by_reason
	// {reason="deferred"}. A step whose admission examines nobody (a step
	// that preempted, or a full batch) leaves them counted, as vLLM leaves
	// them in that queue. step numbers the steps; skipStep is the step
	// skips was counted in.
	skips, step, skipStep int
	series                map[loraSeries]float64
	names                 []string // scratch
}

// loraSeries is one label combination of vllm:lora_requests_info.
type loraSeries struct{ running, waiting string }

func newLoRAState(cfg LoRAConfig) *loraState {
	return &loraState{cfg: cfg, series: map[loraSeries]float64{}}
}

// beginStep starts a step's adapter accounting: the batch holds the
// adapters of the running requests already scheduled.
func (l *loraState) beginStep(sched []*seq) {
	l.batch, l.loads = l.batch[:0], 0
	l.step++
	for _, s := range sched {
		if a := s.req.LoRAName; a != "" && !slices.Contains(l.batch, a) {
			l.batch = append(l.batch, a)
		}
	}
	for _, a := range l.batch {
		l.touch(a)
	}
}

// fits reports whether a waiting request of adapter a may join the batch.
func (l *loraState) fits(a string) bool {
	if l.skipStep != l.step { // the step's first examined request: a new count
		l.skips, l.skipStep = 0, l.step
	}
	ok := a == "" || slices.Contains(l.batch, a) || len(l.batch) < l.cfg.MaxLoRAs
	if !ok {
		l.skips++
	}
	return ok
}

// loraDeferred is how many waiting requests the engine's last admission
// pass skipped for want of an adapter slot, at most waiting (0 without
// Config.LoRA).
func (e *Engine) loraDeferred(waiting int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lo == nil {
		return 0
	}
	return min(e.lo.skips, waiting)
}

// use adds adapter a to the batch, loading it into a slot if needed, and
// reports whether it loaded and which adapter it evicted ("" if none).
func (l *loraState) use(a string) (loaded bool, evicted string) {
	if a == "" || slices.Contains(l.batch, a) {
		return false, ""
	}
	l.batch = append(l.batch, a)
	if slices.Contains(l.slots, a) {
		l.touch(a)
		return false, ""
	}
	if len(l.slots) >= l.cfg.MaxLoRAs {
		// The least recently used adapter outside the batch: one exists,
		// since the batch (a included) holds at most MaxLoRAs adapters
		// and a is in no slot.
		for i, s := range l.slots {
			if !slices.Contains(l.batch, s) {
				evicted = s
				l.slots = slices.Delete(l.slots, i, i+1)
				break
			}
		}
	}
	l.slots = append(l.slots, a)
	l.loads++
	return true, evicted
}

// touch makes a the most recently used slot.
func (l *loraState) touch(a string) {
	if i := slices.Index(l.slots, a); i >= 0 && i != len(l.slots)-1 {
		l.slots = append(slices.Delete(l.slots, i, i+1), a)
	}
}

// stepCost is what the step's loads add to its duration.
func (l *loraState) stepCost(scale float64) time.Duration {
	return durationOf(float64(l.loads) * float64(l.cfg.LoadTime) * scale)
}

// record sets the series of the current running and waiting adapters to
// now, as vLLM does at every iteration.
func (l *loraState) record(running, waiting []*seq, now time.Time) {
	k := loraSeries{running: l.join(running), waiting: l.join(waiting)}
	if _, ok := l.series[k]; !ok && len(l.series) >= maxLoRASeries {
		var oldest loraSeries
		first := true
		for s, v := range l.series {
			if first || v < l.series[oldest] {
				oldest, first = s, false
			}
		}
		delete(l.series, oldest)
	}
	l.series[k] = float64(now.UnixNano()) / 1e9
}

// join lists the distinct adapters of seqs, sorted, comma-separated.
func (l *loraState) join(seqs []*seq) string {
	names := l.names[:0]
	for _, s := range seqs {
		if a := s.req.LoRAName; a != "" && !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	slices.Sort(names)
	l.names = names
	return strings.Join(names, ",")
}

// LoRASeries is one series of the engine's vllm:lora_requests_info gauge.
type LoRASeries struct {
	Running, Waiting string  // comma-separated adapter names
	MaxLoRA          string  // the max_lora label
	Value            float64 // when it was last set, in Unix seconds
}

// LoRASeries returns the engine's vllm:lora_requests_info series, oldest
// first (nil without Config.LoRA).
func (e *Engine) LoRASeries() []LoRASeries {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lo == nil {
		return nil
	}
	out := make([]LoRASeries, 0, len(e.lo.series))
	max := strconv.Itoa(e.lo.cfg.MaxLoRAs)
	for k, v := range e.lo.series {
		out = append(out, LoRASeries{Running: k.running, Waiting: k.waiting, MaxLoRA: max, Value: v})
	}
	slices.SortFunc(out, func(a, b LoRASeries) int {
		switch {
		case a.Value < b.Value:
			return -1
		case a.Value > b.Value:
			return 1
		}
		return strings.Compare(a.Running+"|"+a.Waiting, b.Running+"|"+b.Waiting)
	})
	return out
}

// LoadedLoRAs returns the adapters in the engine's slots, least recently
// used first (nil without Config.LoRA).
func (e *Engine) LoadedLoRAs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lo == nil {
		return nil
	}
	return slices.Clone(e.lo.slots)
}

// UnloadLoRA frees adapter name's slot, as vLLM's remove_lora does when
// the adapter is unloaded at run time, unless a running request uses it
// (it then leaves as the least recently used). A later request of the
// name loads it again. A no-op without Config.LoRA.
func (e *Engine) UnloadLoRA(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lo == nil || slices.ContainsFunc(e.running, func(s *seq) bool { return s.req.LoRAName == name }) {
		return
	}
	e.lo.slots = slices.DeleteFunc(e.lo.slots, func(s string) bool { return s == name })
}
