package main

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Bench is one benchmark's figures, the median over its runs.
type Bench struct {
	Name    string             // without the "Benchmark" prefix and the -P suffix
	Procs   int                // GOMAXPROCS suffix (1 when absent)
	Runs    int                // how many result lines were merged
	N       int                // iterations of the last run
	Metrics map[string]float64 // unit → median value ("ns/op", "B/op", "allocs/op", "blocks/s", …)
}

// Output is a parsed `go test -bench` output.
type Output struct {
	GOOS, GOARCH, Pkg, CPU string
	Benches                []Bench // in first-seen order
	Failed                 bool    // a FAIL line or a failed benchmark
}

// Parse reads standard benchmark output. Lines it does not understand are
// ignored; repeated results of one benchmark (-count) are merged into
// their median per unit.
func Parse(r io.Reader) (*Output, error) {
	out := &Output{}
	samples := map[string]map[string][]float64{}
	index := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "goos: "):
			out.GOOS = strings.TrimPrefix(line, "goos: ")
		case strings.HasPrefix(line, "goarch: "):
			out.GOARCH = strings.TrimPrefix(line, "goarch: ")
		case strings.HasPrefix(line, "pkg: "):
			out.Pkg = strings.TrimPrefix(line, "pkg: ")
		case strings.HasPrefix(line, "cpu: "):
			out.CPU = strings.TrimPrefix(line, "cpu: ")
		case strings.HasPrefix(line, "FAIL"), strings.HasPrefix(line, "--- FAIL"):
			out.Failed = true
		case strings.HasPrefix(line, "Benchmark"):
			name, procs, n, metrics, ok := parseLine(line)
			if !ok {
				continue
			}
			i, seen := index[name]
			if !seen {
				i = len(out.Benches)
				index[name] = i
				out.Benches = append(out.Benches, Bench{Name: name, Procs: procs})
				samples[name] = map[string][]float64{}
			}
			out.Benches[i].Runs++
			out.Benches[i].N = n
			for unit, v := range metrics {
				samples[name][unit] = append(samples[name][unit], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i := range out.Benches {
		b := &out.Benches[i]
		b.Metrics = map[string]float64{}
		for unit, vs := range samples[b.Name] {
			b.Metrics[unit] = median(vs)
		}
	}
	return out, nil
}

// parseLine parses "BenchmarkX/y=1-2  1000  123 ns/op  4.5 ns/block  0 B/op".
func parseLine(line string) (name string, procs, n int, metrics map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return "", 0, 0, nil, false
	}
	name, procs = strings.TrimPrefix(f[0], "Benchmark"), 1
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if p, err := strconv.Atoi(name[i+1:]); err == nil {
			name, procs = name[:i], p
		}
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return "", 0, 0, nil, false
	}
	metrics = map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", 0, 0, nil, false
		}
		metrics[f[i+1]] = v
	}
	return name, procs, n, metrics, true
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Find returns the benchmark with this name.
func (o *Output) Find(name string) (Bench, bool) {
	for _, b := range o.Benches {
		if b.Name == name {
			return b, true
		}
	}
	return Bench{}, false
}
