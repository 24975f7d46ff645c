package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kvroute/kvroute/render"
)

// The gateway child tells its render CPU apart from the rest with a pprof
// goroutine label: while a render HTTP attempt runs (the render client's
// "render" span), the goroutine carries stageLabel=stageRender, and so do
// the goroutines started meanwhile, which are the render connections' own
// read and write loops (net/http dials a connection from the goroutine that
// needs it, and a new goroutine inherits its creator's labels). Everything
// else the gateway does, the engines' connections included, is unlabelled.
// The CPU profile of a window then says what share of the gateway's CPU
// went to render.
const (
	stageLabel  = "kvroute_stage"
	stageRender = "render"
)

// renderLabeler is a trace.TracerProvider that only gives the render client
// a tracer, one that labels the goroutine for the span's lifetime and
// records nothing. To every other instrumentation scope (the router's and
// the gateway's) it returns a nil Tracer, which they treat as "no tracing",
// so that they run exactly as without a provider.
type renderLabeler struct{ noop.TracerProvider }

func (renderLabeler) Tracer(name string, _ ...trace.TracerOption) trace.Tracer {
	if name == render.TracerName {
		return labelTracer{}
	}
	return nil
}

type labelTracer struct{ noop.Tracer }

func (labelTracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	if name != render.SpanRender {
		return ctx, noop.Span{}
	}
	lctx := pprof.WithLabels(ctx, pprof.Labels(stageLabel, stageRender))
	pprof.SetGoroutineLabels(lctx)
	return lctx, &labelSpan{restore: ctx}
}

// labelSpan restores the goroutine's labels of before the span when it ends
// (the render client ends its span on the goroutine that started it).
type labelSpan struct {
	noop.Span
	restore context.Context
}

func (s *labelSpan) End(...trace.SpanEndOption) { pprof.SetGoroutineLabels(s.restore) }

// profileShare reads a CPU profile (runtime/pprof's gzipped protobuf) and
// returns the CPU time of all its samples and of those that are render's:
// labelled key=value, or with a function named with funcPrefix on their
// stack, in nanoseconds.
func profileShare(r io.Reader, key, value, funcPrefix string) (total, matched int64, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, 0, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return 0, 0, err
	}
	// Profile: sample_type = 1, sample = 2, location = 4, function = 5,
	// string_table = 6. Sample: location_id = 1 (packed), value = 2
	// (packed), label = 3. Label: key = 1, str = 2 (string indices).
	// Location: id = 1, line = 4 (Line: function_id = 1). Function: id = 1,
	// name = 2.
	var (
		strs          []string
		samples, locs [][]byte
		funcs         [][]byte
		types         int
	)
	err = eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			types++
		case 2:
			samples = append(samples, v)
		case 4:
			locs = append(locs, v)
		case 5:
			funcs = append(funcs, v)
		case 6:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	// A CPU profile's samples hold (samples, CPU nanoseconds).
	const cpuIndex = 1
	if types != 2 {
		return 0, 0, fmt.Errorf("profile has %d sample types, want 2 (a CPU profile)", types)
	}
	str := func(i uint64) string {
		if i < uint64(len(strs)) {
			return strs[i]
		}
		return ""
	}
	renderFunc := map[uint64]bool{}
	for _, f := range funcs {
		var id, name uint64
		if err := eachVarint(f, func(num protowire.Number, x uint64) {
			switch num {
			case 1:
				id = x
			case 2:
				name = x
			}
		}); err != nil {
			return 0, 0, err
		}
		if funcPrefix != "" && strings.HasPrefix(str(name), funcPrefix) {
			renderFunc[id] = true
		}
	}
	renderLoc := map[uint64]bool{}
	for _, l := range locs {
		var id uint64
		hit := false
		if err := eachVarint(l, func(num protowire.Number, x uint64) {
			if num == 1 {
				id = x
			}
		}); err != nil {
			return 0, 0, err
		}
		if err := eachField(l, func(num protowire.Number, v []byte) error {
			if num != 4 {
				return nil
			}
			return eachVarint(v, func(num protowire.Number, x uint64) {
				if num == 1 && renderFunc[x] {
					hit = true
				}
			})
		}); err != nil {
			return 0, 0, err
		}
		if hit {
			renderLoc[id] = true
		}
	}
	for _, sm := range samples {
		var vals []int64
		match := false
		err := eachField(sm, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				return eachPacked(v, func(x uint64) {
					if renderLoc[x] {
						match = true
					}
				})
			case 2:
				return eachPacked(v, func(x uint64) { vals = append(vals, int64(x)) })
			case 3:
				var k, s uint64
				if err := eachVarint(v, func(num protowire.Number, x uint64) {
					switch num {
					case 1:
						k = x
					case 2:
						s = x
					}
				}); err != nil {
					return err
				}
				if str(k) == key && str(s) == value {
					match = true
				}
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		if len(vals) <= cpuIndex {
			return 0, 0, fmt.Errorf("a sample has %d values", len(vals))
		}
		total += vals[cpuIndex]
		if match {
			matched += vals[cpuIndex]
		}
	}
	return total, matched, nil
}

// eachPacked calls f with every varint of a packed repeated field.
func eachPacked(v []byte, f func(uint64)) error {
	for len(v) > 0 {
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		f(x)
		v = v[n:]
	}
	return nil
}

// eachField calls f with every length-delimited field of a protobuf
// message (and skips the others). Packed repeated varints arrive as bytes.
func eachField(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			if err := f(num, v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		if typ == protowire.VarintType && (num == 1 || num == 2) {
			// An unpacked repeated varint: hand it over as a one-varint
			// packed field.
			if err := f(num, b[:m]); err != nil {
				return err
			}
		}
		b = b[m:]
	}
	return nil
}

// eachVarint calls f with every varint field of a message.
func eachVarint(b []byte, f func(protowire.Number, uint64)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType {
			x, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			f(num, x)
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

// renderFuncs names the render client's methods: a sample with one on its
// stack is render's CPU, labelled or not (the body's preparation runs before
// the attempt's span opens).
const renderFuncs = "github.com/kvroute/kvroute/render.(*Client)."

// renderShare returns the share of a CPU profile's CPU that is render's (0
// to 1): the render client's calls (by stack) and its connections'
// goroutines (by label); and the profile's total CPU.
func renderShare(profile []byte) (share float64, total int64, err error) {
	total, lab, err := profileShare(bytes.NewReader(profile), stageLabel, stageRender, renderFuncs)
	if err != nil || total == 0 {
		return 0, total, err
	}
	return float64(lab) / float64(total), total, nil
}
