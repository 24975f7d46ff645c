package enginemetrics

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
)

// vLLM's LoRA gauge and its labels (vllm/v1/metrics/loggers.py). vLLM sets
// the gauge to the wall-clock time of each scheduler iteration under the
// label values of that iteration, so every combination of adapters it ever
// reported stays on /metrics as its own series; the one with the largest
// value is the current one.
const (
	metricLoRA        = "vllm:lora_requests_info"
	labelRunningLoRAs = "running_lora_adapters"
	labelWaitingLoRAs = "waiting_lora_adapters"
	labelMaxLoRA      = "max_lora"
)

// Bounds on what one scrape keeps of the LoRA gauge: its label values come
// from the engine, so they are checked and cut before anything keeps them.
const (
	// MaxLoRAAdapters is the most adapter names kept per list (running or
	// waiting) of one endpoint; the rest are dropped and counted.
	MaxLoRAAdapters = 64
	// MaxLoRANameBytes is the longest adapter name kept.
	MaxLoRANameBytes = 256
	// maxMaxLoRA bounds the max_lora label: larger values are not a
	// number of adapter slots any engine has.
	maxMaxLoRA = 1 << 16
)

// Reasons an adapter name (or the max_lora label) of the LoRA gauge is
// dropped, the reason label of kvroute_engine_metrics_lora_dropped_total.
const (
	loraDropInvalid = "invalid_name" // empty, not UTF-8, control characters, or longer than MaxLoRANameBytes
	loraDropTooMany = "too_many"     // beyond MaxLoRAAdapters in one list
	loraDropMaxLoRA = "bad_max_lora" // max_lora is not an integer in [0, 65536]
	loraDropGauge   = "bad_gauge"    // the gauge is not a gauge, or none of its series has a finite value: read as no adapters
)

// loraDropReasons lists every drop reason, so that their series exist at
// zero.
var loraDropReasons = []string{loraDropInvalid, loraDropTooMany, loraDropMaxLoRA, loraDropGauge}

// loraDrops counts what one parse dropped, by reason (loraDropReasons'
// order).
type loraDrops [4]int

// LoRAInfo is an engine's LoRA adapter state as vLLM's
// vllm:lora_requests_info gauge last reported it: the adapters of the
// requests in its running batch and in its waiting queue, and its adapter
// slots (--max-loras). The slices are shared and must not be modified.
type LoRAInfo struct {
	// Reported is true when the engine exposes the gauge (it runs with
	// --enable-lora); the other fields are zero otherwise.
	Reported bool
	// Running are the adapters of the requests in the running batch: an
	// adapter named here is loaded in one of the engine's slots.
	Running []string
	// Waiting are the adapters of queued requests; vLLM queues a request
	// whose adapter finds no free slot in the batch.
	Waiting []string
	// MaxLoRA is the max_lora label: how many adapters one batch may use
	// (vLLM --max-loras); 0 when the label is absent or invalid.
	MaxLoRA int
	// Timestamp is the gauge's value: the engine's wall-clock time, in
	// seconds, of the iteration the series describes.
	Timestamp float64
}

// IsRunning reports whether adapter is in Running. It allocates nothing.
func (l *LoRAInfo) IsRunning(adapter string) bool { return contains(l.Running, adapter) }

// IsWaiting reports whether adapter is in Waiting. It allocates nothing.
func (l *LoRAInfo) IsWaiting(adapter string) bool { return contains(l.Waiting, adapter) }

// Adapters is the number of distinct adapters the engine reported, running
// or waiting: the slots it would need to serve them all at once.
func (l *LoRAInfo) Adapters() int {
	n := len(l.Running)
	for _, w := range l.Waiting {
		if !contains(l.Running, w) {
			n++
		}
	}
	return n
}

// AtCap reports whether the engine cannot take another adapter into its
// batch without one leaving: its reported adapters fill MaxLoRA. An engine
// whose MaxLoRA is unknown (0) is never at its cap.
func (l *LoRAInfo) AtCap() bool { return l.MaxLoRA > 0 && l.Adapters() >= l.MaxLoRA }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseLoRA reads the LoRA gauge's current series from the parsed
// families. vLLM adds a series per combination of label values and leaves
// the older ones in place, each at the time it was last set; the current
// state is the series with the largest value. Like the Gateway API
// Inference Extension's scraper, series that name no adapter (an idle
// iteration) are passed over when another names one: vLLM keeps an idle
// engine's adapters loaded, so the last series that named adapters is the
// better picture of its slots. max_lora is read from that series too. A
// missing gauge is not an error: the engine serves no adapters.
func parseLoRA(mfs map[string]*dto.MetricFamily) (LoRAInfo, loraDrops) {
	var drops loraDrops
	mf := mfs[metricLoRA]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return LoRAInfo{}, drops
	}
	if t := mf.GetType(); t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED {
		drops[3]++
		return LoRAInfo{}, drops
	}
	var best *dto.Metric
	bestTS, bestNamed := math.Inf(-1), false
	for _, m := range mf.GetMetric() {
		ts := value(m)
		if math.IsNaN(ts) || math.IsInf(ts, 0) {
			continue
		}
		named := labelValue(m, labelRunningLoRAs) != "" || labelValue(m, labelWaitingLoRAs) != ""
		switch {
		case named && !bestNamed, named == bestNamed && ts > bestTS:
			best, bestTS, bestNamed = m, ts, named
		}
	}
	if best == nil {
		drops[3]++
		return LoRAInfo{}, drops
	}
	info := LoRAInfo{Reported: true, Timestamp: bestTS}
	info.Running = adapterList(labelValue(best, labelRunningLoRAs), &drops)
	info.Waiting = adapterList(labelValue(best, labelWaitingLoRAs), &drops)
	if v := strings.TrimSpace(labelValue(best, labelMaxLoRA)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxMaxLoRA {
			drops[2]++
		} else {
			info.MaxLoRA = n
		}
	}
	return info, drops
}

// adapterList splits a comma-separated label value into valid, distinct
// adapter names (spaces around a name are trimmed, as the Inference
// Extension's protocol example writes "a, b"), at most MaxLoRAAdapters.
func adapterList(v string, drops *loraDrops) []string {
	if v == "" {
		return nil
	}
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		name := strings.TrimSpace(part)
		switch {
		case !validAdapterName(name):
			drops[0]++
		case contains(out, name):
		case len(out) >= MaxLoRAAdapters:
			drops[1]++
		default:
			out = append(out, strings.Clone(name))
		}
	}
	return out
}

// validAdapterName reports whether name may be kept: non-empty, at most
// MaxLoRANameBytes, valid UTF-8 and free of control characters.
func validAdapterName(name string) bool {
	if name == "" || len(name) > MaxLoRANameBytes || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
