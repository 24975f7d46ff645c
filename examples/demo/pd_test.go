package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestPDFlag(t *testing.T) {
	_, err := parseFlags([]string{"--pd", "--fast"}, io.Discard)
	require.NoError(t, err)
	require.True(t, pd)
	for _, bad := range [][]string{{"--pd", "--replicas", "2"}, {"--pd", "--hold"}} {
		_, err := parseFlags(bad, io.Discard)
		require.ErrorContains(t, err, "--pd runs alone", bad)
	}
	_, err = parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.False(t, pd, "each parse starts from the default")
	replicas = 1
}

// pdRow is one row of the P/D step's table as printed.
type pdRow struct {
	policy         string
	requests, ok   int
	split          float64
	ttft50, ttft90 int
	itlMean, itl99 float64
	kinds          [3][2]int // first turns, follow-ups, documents: split, requests
}

var pdRowRE = regexp.MustCompile(`^  (\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)%\s+(\d+) ms\s+(\d+) ms\s+([\d.]+) ms\s+([\d.]+) ms\s+(\d+)/(\d+) (\d+)/(\d+) (\d+)/(\d+)$`)

// TestPDDemo runs `demo --pd --fast` end to end and checks the table's
// shape and what it must show whatever the machine's speed: three rows
// (aggregated, always-split, decider) of the same workload, every request
// succeeded, aggregated split none, always-split all, the decider some but
// not all (every one-off document, no follow-up it could keep local), and
// nothing left running. No assertion is made on the times.
func TestPDDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the P/D demo")
	}
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"--pd", "--fast"}, &out, io.Discard), out.String())
	text := out.String()

	_, table, ok := strings.Cut(text, "\n  policy ")
	require.True(t, ok, "the table's header:\n%s", text)
	header, _, _ := strings.Cut(table, "\n")
	for _, col := range []string{"requests", "ok", "split", "TTFT p50", "TTFT p90", "ITL mean", "ITL p99", "first turns / follow-ups / documents"} {
		require.Contains(t, header, col)
	}
	var rows []pdRow
	for _, line := range strings.Split(table, "\n")[1:] {
		m := pdRowRE.FindStringSubmatch(line)
		if m == nil {
			break
		}
		n := func(i int) int { v, err := strconv.Atoi(m[i]); require.NoError(t, err); return v }
		f := func(i int) float64 { v, err := strconv.ParseFloat(m[i], 64); require.NoError(t, err); return v }
		r := pdRow{policy: m[1], requests: n(2), ok: n(3), split: f(4), ttft50: n(5), ttft90: n(6), itlMean: f(7), itl99: f(8)}
		for k := range 3 {
			r.kinds[k] = [2]int{n(9 + 2*k), n(10 + 2*k)}
		}
		rows = append(rows, r)
	}
	require.Len(t, rows, 3, text)
	for i, want := range []string{"aggregated", "always-split", "decider"} {
		r := rows[i]
		require.Equal(t, want, r.policy)
		require.Positive(t, r.requests)
		require.Equal(t, rows[0].requests, r.requests, "the same workload for every policy")
		require.Equal(t, r.requests, r.ok, "%s: every request succeeded", want)
		require.LessOrEqual(t, r.ttft50, r.ttft90, want)
		require.Positive(t, r.itlMean, want)
		require.Positive(t, r.itl99, want)
		splits, total := 0, 0
		for k, c := range r.kinds {
			require.LessOrEqual(t, c[0], c[1], "%s kind %d", want, k)
			require.Positive(t, c[1], "%s: the workload has every kind", want)
			require.Equal(t, rows[0].kinds[k][1], c[1], "%s kind %d", want, k)
			splits += c[0]
			total += c[1]
		}
		require.Equal(t, r.ok, total, want)
		require.InDelta(t, 100*float64(splits)/float64(total), r.split, 0.05, want)
	}
	require.Zero(t, rows[0].split, "aggregated serving splits nothing")
	require.Equal(t, 100.0, rows[1].split, "always-split splits everything")
	dec := rows[2]
	require.Greater(t, dec.split, 0.0, "the decider splits some")
	require.Less(t, dec.split, 100.0, "the decider keeps some local")
	require.Equal(t, dec.kinds[2][1], dec.kinds[2][0], "the decider splits every one-off long document")
	require.Less(t, dec.kinds[1][0], dec.kinds[1][1], "the decider keeps follow-up turns local")
	require.Contains(t, text, "PASS: every request succeeded")
	require.Contains(t, text, "every engine, sidecar and gateway of the step is stopped")
}
