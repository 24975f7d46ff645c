package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// policyColors are the chart colours per policy (colour-blind safe).
var policyColors = map[Policy]string{
	KVRoute:            "#0072B2",
	Approximate:        "#E69F00",
	LeastLoad:          "#009E73",
	RoundRobin:         "#CC79A7",
	Dynamo:             "#D55E00",
	SGLang:             "#56B4E9",
	SGLangEvents:       "#000000",
	KVRoutePrefillOnly: "#7FA7C9",
}

// WriteSVG writes a line chart of TTFT p90 (log scale) against load, one
// line per policy, for one workload.
func WriteSVG(w io.Writer, kind WorkloadKind, results []Result) error {
	const (
		width, height          = 720, 420
		left, right, top, bot  = 70, 190, 40, 50
		plotW, plotH           = width - left - right, height - top - bot
		minTTFT, minLogSpanDec = 1e-3, 1.0
	)
	loads := loadsOf(results, kind)
	if len(loads) == 0 {
		return fmt.Errorf("sim: no results for workload %s", kind)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		if r.Workload != kind {
			continue
		}
		v := math.Log10(math.Max(r.TTFTP90.Seconds(), minTTFT))
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi-lo < minLogSpanDec {
		hi = lo + minLogSpanDec
	}
	xMin, xMax := loads[0], loads[len(loads)-1]
	if xMax == xMin {
		xMin, xMax = xMin-0.5, xMax+0.5
	}
	x := func(l float64) float64 { return left + (l-xMin)/(xMax-xMin)*plotW }
	y := func(s float64) float64 {
		v := math.Log10(math.Max(s, minTTFT))
		return top + (hi-v)/(hi-lo)*plotH
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">TTFT p90 against load — %s</text>`+"\n", left, kind)
	// Horizontal grid: one line per decade.
	for d := lo; d <= hi; d++ {
		yy := y(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, left+plotW, yy)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, yy, decade(d))
	}
	for _, l := range loads {
		xx := x(l)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", xx, top, xx, top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.2f</text>`+"\n", xx, top+plotH+18, l)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">load (offered QPS ÷ fleet prefill capacity)</text>`+"\n", left+plotW/2, height-10)
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">TTFT p90 (log scale)</text>`+"\n", top+plotH/2, top+plotH/2)
	legend := 0
	for _, p := range AllPolicies {
		var pts []string
		for _, l := range loads {
			if r, ok := find(results, kind, l, p); ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(l), y(r.TTFTP90.Seconds())))
			}
		}
		if len(pts) == 0 {
			continue
		}
		c, dash := policyColors[p], ""
		if p == KVRoutePrefillOnly {
			dash = ` stroke-dasharray="6 4"` // the "before" of kvroute's default
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
		for _, pt := range pts {
			xy := strings.Split(pt, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n", xy[0], xy[1], c)
		}
		ly := top + 10 + legend*20
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+plotW+14, ly, left+plotW+36, ly, c, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", left+plotW+42, ly, p)
		legend++
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// decade labels 10^d seconds.
func decade(d float64) string {
	s := math.Pow(10, d)
	switch {
	case s >= 1:
		return fmt.Sprintf("%g s", s)
	default:
		return fmt.Sprintf("%g ms", s*1000)
	}
}
