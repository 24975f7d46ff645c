package enginemetrics

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// vLLM's metric names the scraper reads (vllm/v1/metrics/loggers.py). vLLM
// before 0.9 named the KV-cache gauge gpu_cache_usage_perc; it is read when
// the new name is absent.
const (
	metricWaiting   = "vllm:num_requests_waiting"
	metricRunning   = "vllm:num_requests_running"
	metricKVUsage   = "vllm:kv_cache_usage_perc"
	metricGPUUsage  = "vllm:gpu_cache_usage_perc"
	engineLabel     = "engine"
	maxQueueLength  = 1 << 30 // larger gauge values are clamped
	parseErrorLimit = 200     // bytes of a parse error kept for the log
)

// Failure reasons of a scrape, the reason label of
// kvroute_engine_metrics_scrape_failures_total.
const (
	reasonConnection = "connection"     // dial, TLS or read failure
	reasonTimeout    = "timeout"        // the scrape exceeded Config.Timeout
	reasonStatus     = "http_status"    // a status other than 200, a redirect included (never followed)
	reasonTooLarge   = "too_large"      // the body exceeded Config.MaxBodyBytes
	reasonParse      = "parse"          // the vLLM lines are not the Prometheus text format
	reasonMissing    = "missing_metric" // a required metric is absent
	reasonBadValue   = "bad_value"      // NaN, infinite or negative value
)

// reasons lists every failure reason, so that their series exist at zero.
var reasons = []string{reasonConnection, reasonTimeout, reasonStatus, reasonTooLarge, reasonParse, reasonMissing, reasonBadValue}

// scrapeError is a failed scrape with its reason.
type scrapeError struct {
	reason string
	err    error
}

func (e *scrapeError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *scrapeError) Unwrap() error { return e.err }

func failure(reason string, format string, args ...any) *scrapeError {
	return &scrapeError{reason: reason, err: fmt.Errorf(format, args...)}
}

// wanted reports whether name is one of the metric names the scraper reads.
func wanted(name []byte) bool {
	switch string(name) {
	case metricWaiting, metricRunning, metricKVUsage, metricGPUUsage, metricLoRA, metricCacheConfig, metricOffloadConfig:
		return true
	}
	return false
}

// filterLines keeps the lines of a text exposition that belong to the vLLM
// gauges read here (their samples, HELP and TYPE lines): a vLLM server
// exposes hundreds of series, histograms mostly, and parsing all of them
// on every scrape of every endpoint would cost far more than the three
// gauges are worth. Lines of other metrics are not checked. In the LoRA
// gauge's lines every byte that is not valid UTF-8 becomes DEL
// (markInvalidUTF8; see there).
func filterLines(body []byte) []byte {
	var out []byte
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i+1], body[i+1:]
		} else {
			body = nil
		}
		l := bytes.TrimLeft(line, " \t")
		var name []byte
		if rest, ok := bytes.CutPrefix(l, []byte("#")); ok {
			f := bytes.Fields(rest)
			if len(f) >= 2 && (string(f[0]) == "HELP" || string(f[0]) == "TYPE") {
				name = f[1]
			}
		} else {
			end := bytes.IndexAny(l, "{ \t\r\n")
			if end < 0 {
				end = len(l)
			}
			name = l[:end]
		}
		if name != nil && wanted(name) {
			if string(name) == metricLoRA && !utf8.Valid(line) {
				out = markInvalidUTF8(out, line)
			} else {
				out = append(out, line...)
			}
			if line[len(line)-1] != '\n' {
				out = append(out, '\n')
			}
		}
	}
	return out
}

// invalidUTF8Mark replaces a byte that is not valid UTF-8 in the LoRA
// gauge's lines: DEL, a control character, which no adapter name may hold
// and which is none of the text format's delimiters (quote, backslash,
// newline) nor the adapter lists' comma.
const invalidUTF8Mark = 0x7f

// markInvalidUTF8 appends line to out with every byte that is not part of
// valid UTF-8 replaced by invalidUTF8Mark. The LoRA gauge's label values
// are adapter names the engine took from its clients: expfmt rejects a
// label value that is not UTF-8, and would fail the whole scrape as parse,
// losing the engine's queue and KV-cache signal for as long as vLLM keeps
// that series (its lifetime). Marked, such a name is dropped and counted
// as invalid_name (validAdapterName refuses control characters), a
// max_lora as bad_max_lora, and the rest of the scrape is kept. The cost
// is one pass over the gauge's lines, only when one is not UTF-8.
func markInvalidUTF8(out, line []byte) []byte {
	for len(line) > 0 {
		r, n := utf8.DecodeRune(line)
		if r == utf8.RuneError && n == 1 {
			out = append(out, invalidUTF8Mark)
		} else {
			out = append(out, line[:n]...)
		}
		line = line[n:]
	}
	return out
}

// parseSignal reads the waiting, running and KV-cache gauges from a
// Prometheus text exposition (OpenMetrics 1.0 gauges read the same). When
// the exposition holds one series per engine (vLLM's data-parallel ranks),
// the series whose engine label is rank are read; when none carries that
// label value, the series are combined: queue lengths summed, KV-cache usage
// the highest. The LoRA gauge and the cache configuration, when present,
// are read too (parseLoRA, parseCache).
func parseSignal(body []byte, rank int) (Signal, *scrapeError) {
	sig, _, err := parse(body, rank)
	return sig, err
}

// parse is parseSignal that also returns what the LoRA gauge's parse
// dropped.
func parse(body []byte, rank int) (Signal, loraDrops, *scrapeError) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(filterLines(body)))
	if err != nil {
		msg := err.Error()
		if len(msg) > parseErrorLimit {
			msg = msg[:parseErrorLimit]
		}
		return Signal{}, loraDrops{}, failure(reasonParse, "%s", msg)
	}
	engine := strconv.Itoa(rank)
	var sig Signal
	waiting, err1 := gauge(mfs, metricWaiting, engine, false)
	running, err2 := gauge(mfs, metricRunning, engine, false)
	kvName := metricKVUsage
	if mfs[kvName] == nil && mfs[metricGPUUsage] != nil {
		kvName = metricGPUUsage
	}
	kv, err3 := gauge(mfs, kvName, engine, true)
	if e := errors.Join(err1, err2, err3); e != nil {
		var se *scrapeError
		if errors.As(e, &se) {
			return Signal{}, loraDrops{}, se
		}
		return Signal{}, loraDrops{}, failure(reasonParse, "%v", e)
	}
	sig.Waiting = int(math.Min(waiting, maxQueueLength))
	sig.Running = int(math.Min(running, maxQueueLength))
	sig.KVCacheUsage = kv
	var drops loraDrops
	sig.LoRA, drops = parseLoRA(mfs)
	sig.Cache = parseCache(mfs, engine)
	return sig, drops, nil
}

// gauge returns a family's value for one engine (see parseSignal): the sum
// of the selected series, or their maximum when max is set.
func gauge(mfs map[string]*dto.MetricFamily, name, engine string, max bool) (float64, error) {
	mf := mfs[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, failure(reasonMissing, "no %s series", name)
	}
	if t := mf.GetType(); t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED {
		return 0, failure(reasonParse, "%s is a %s, not a gauge", name, t)
	}
	ms := mf.GetMetric()
	for _, m := range ms {
		if labelValue(m, engineLabel) == engine {
			ms = []*dto.Metric{m}
			break
		}
	}
	var v float64
	for i, m := range ms {
		x := value(m)
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0, failure(reasonBadValue, "%s is %v", name, x)
		}
		switch {
		case !max:
			v += x
		case i == 0 || x > v:
			v = x
		}
	}
	return v, nil
}

func value(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetUntyped().GetValue()
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
