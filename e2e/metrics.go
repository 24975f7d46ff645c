package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one sample of a scrape: a series name (histograms and summaries
// contribute their _bucket, _sum and _count series, as exposed) and its
// labels.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is one scrape of a Prometheus text endpoint: every sample.
type Metrics []Sample

// ParseMetrics reads the Prometheus text exposition format with the
// Prometheus project's own parser (github.com/prometheus/common/expfmt), so a
// malformed exposition is an error rather than silently half-read.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	var m Metrics
	for name, f := range fams {
		for _, s := range f.GetMetric() {
			labels := make(map[string]string, len(s.GetLabel()))
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			m = appendSamples(m, name, f.GetType(), s, labels)
		}
	}
	return m, nil
}

// appendSamples adds the series of one metric, as the text format exposes
// them.
func appendSamples(m Metrics, name string, t dto.MetricType, s *dto.Metric, labels map[string]string) Metrics {
	with := func(k, v string) map[string]string {
		out := make(map[string]string, len(labels)+1)
		for lk, lv := range labels {
			out[lk] = lv
		}
		out[k] = v
		return out
	}
	switch t {
	case dto.MetricType_COUNTER:
		return append(m, Sample{name, labels, s.GetCounter().GetValue()})
	case dto.MetricType_GAUGE:
		return append(m, Sample{name, labels, s.GetGauge().GetValue()})
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		h := s.GetHistogram()
		for _, b := range h.GetBucket() {
			m = append(m, Sample{name + "_bucket", with("le", formatFloat(b.GetUpperBound())), float64(b.GetCumulativeCount())})
		}
		return append(m, Sample{name + "_sum", labels, h.GetSampleSum()}, Sample{name + "_count", labels, float64(h.GetSampleCount())})
	case dto.MetricType_SUMMARY:
		sm := s.GetSummary()
		for _, q := range sm.GetQuantile() {
			m = append(m, Sample{name, with("quantile", formatFloat(q.GetQuantile())), q.GetValue()})
		}
		return append(m, Sample{name + "_sum", labels, sm.GetSampleSum()}, Sample{name + "_count", labels, float64(sm.GetSampleCount())})
	default:
		return append(m, Sample{name, labels, s.GetUntyped().GetValue()})
	}
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Sum adds every sample of the series called name, whatever its labels.
func (m Metrics) Sum(name string) float64 { return m.Get(name) }

// Get returns the sum of the samples of name whose labels include every
// label=value pair given (as "label", "value", ...).
func (m Metrics) Get(name string, labelPairs ...string) float64 {
	total := 0.0
	for _, s := range m {
		if s.Name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labelPairs); i += 2 {
			if v, has := s.Labels[labelPairs[i]]; !has || v != labelPairs[i+1] {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

// Scrape fetches and parses baseURL + "/metrics".
func Scrape(ctx context.Context, client *http.Client, baseURL string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", baseURL, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
