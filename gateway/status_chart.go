package gateway

import (
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"
)

// The status page's accuracy chart: the cached share of prompt tokens the
// router predicted against the share the engines reported reusing, per
// historyBucket, over the last historyBuckets of them.
const (
	historyBucket  = 10 * time.Second
	historyBuckets = 90 // 15 minutes
)

// shareSample is one bucket of observed requests: those that ended with the
// engine's cached tokens within historyBucket from Start.
type shareSample struct {
	Start                     time.Time
	Prompt, Predicted, Actual int64 // tokens summed over the bucket's requests
	Requests                  int
}

// PredictedShare is the share of the bucket's prompt tokens the router
// predicted cached, 0 to 1.
func (s shareSample) PredictedShare() float64 { return float64(s.Predicted) / float64(s.Prompt) }

// ActualShare is the share of the bucket's prompt tokens the engines
// reported reusing, 0 to 1.
func (s shareSample) ActualShare() float64 { return float64(s.Actual) / float64(s.Prompt) }

// shareHistory is a bounded ring of shareSamples, safe for concurrent use:
// a fixed array, whatever the request rate.
type shareHistory struct {
	mu   sync.Mutex
	ring [historyBuckets]shareSample
	n    int // buckets ever started
}

// add records one observed request that ended at now: prompt tokens, the
// cached tokens predicted (as the engine could honour them) and those the
// engine reported.
func (h *shareHistory) add(now time.Time, prompt, predicted, actual int) {
	if prompt <= 0 {
		return
	}
	start := now.Truncate(historyBucket)
	h.mu.Lock()
	defer h.mu.Unlock()
	var s *shareSample
	if h.n > 0 {
		last := &h.ring[(h.n-1)%historyBuckets]
		if !start.After(last.Start) { // this bucket, or a clock that stepped back
			s = last
		}
	}
	if s == nil {
		s = &h.ring[h.n%historyBuckets]
		*s = shareSample{Start: start}
		h.n++
	}
	s.Prompt += int64(prompt)
	s.Predicted += int64(predicted)
	s.Actual += int64(actual)
	s.Requests++
}

// samples returns the buckets, oldest first.
func (h *shareHistory) samples() []shareSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := min(h.n, historyBuckets)
	out := make([]shareSample, 0, k)
	for i := h.n - k; i < h.n; i++ {
		out = append(out, h.ring[i%historyBuckets])
	}
	return out
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH   = 600.0, 160.0
	chartL, chartR   = 40.0, 10.0 // left margin (axis labels), right margin
	chartT, chartB   = 10.0, 20.0 // top and bottom margins
	predictedColor   = "#1f6fd1"
	engineColor      = "#e07000"
	chartWindowLabel = "−15 min"
)

// shareChart draws samples (oldest first) as an inline SVG: two lines,
// predicted and engine-reported cached share, on a 0–100 % axis over the
// historyBuckets buckets that end at now's bucket. Every value drawn is a
// number the chart computes, so the markup needs no escaping.
func shareChart(samples []shareSample, now time.Time) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="share-chart" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="predicted and engine-reported cached share of prompt tokens">`,
		chartW, chartH, chartW, chartH)
	plotW, plotH := chartW-chartL-chartR, chartH-chartT-chartB
	for _, pct := range []int{0, 50, 100} {
		y := chartT + plotH*(1-float64(pct)/100)
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/><text x="%g" y="%.1f" font-size="10" text-anchor="end">%d%%</text>`,
			chartL, y, chartW-chartR, y, chartL-4, y+3, pct)
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10">%s</text><text x="%g" y="%g" font-size="10" text-anchor="end">now</text>`,
		chartL, chartH-6, chartWindowLabel, chartW-chartR, chartH-6)
	end := now.Truncate(historyBucket)
	from := end.Add(-(historyBuckets - 1) * historyBucket)
	x := func(s shareSample) float64 {
		i := float64(s.Start.Sub(from)) / float64(historyBucket)
		return chartL + plotW*min(max(i, 0), historyBuckets-1)/(historyBuckets-1)
	}
	y := func(share float64) float64 { return chartT + plotH*(1-min(max(share, 0), 1)) }
	for _, line := range []struct {
		class, color string
		r            float64 // predicted's dot is larger: equal shares show as a ring around the engine's
		share        func(shareSample) float64
	}{
		{"predicted", predictedColor, 4, shareSample.PredictedShare},
		{"engine", engineColor, 2.5, shareSample.ActualShare},
	} {
		var pts []string
		for _, s := range samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s), y(line.share(s))))
		}
		fmt.Fprintf(&b, `<polyline class="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`,
			line.class, line.color, strings.Join(pts, " "))
		for _, s := range samples {
			fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="%g" fill="%s"><title>%s: %s %.0f%% of %d prompt tokens (%d requests)</title></circle>`,
				line.class, x(s), y(line.share(s)), line.r, line.color, s.Start.UTC().Format("15:04:05"), line.class, 100*line.share(s), s.Prompt, s.Requests)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and fixed text only
}
