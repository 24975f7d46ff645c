package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// watchWriter is a stderr that closes seen when what has been written
// contains want.
type watchWriter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// While the benchmarks run, the report says it is still running and how
// many results it has, instead of staying silent for minutes; the
// heartbeat's goroutine ends with the run.
func TestReportSaysItIsStillRunning(t *testing.T) {
	defer leakcheck.Check(t)()
	saved, err := os.ReadFile("testdata/bench.txt")
	require.NoError(t, err)
	first, rest, _ := strings.Cut(string(saved), "\nBenchmarkKeys")
	rest = "BenchmarkKeys" + rest
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "first.txt"), []byte(first+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rest.txt"), []byte(rest), 0o644))
	// A go command that prints the output's head, then waits for the test
	// to release it before printing the rest.
	fakeGo := filepath.Join(dir, "go")
	require.NoError(t, os.WriteFile(fakeGo, []byte(`#!/bin/sh
if [ "$1" = env ]; then echo go1.26.0; exit 0; fi
cat `+filepath.Join(dir, "first.txt")+`
while [ ! -e `+release+` ]; do sleep 0.01; done
cat `+filepath.Join(dir, "rest.txt")+`
`), 0o755))

	interval := heartbeat
	defer func() { heartbeat = interval }()
	heartbeat = 5 * time.Millisecond
	stderr := &watchWriter{want: "report: still running", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"-go", fakeGo, "-out", filepath.Join(dir, "out")}, &bytes.Buffer{}, stderr)
	}()
	select {
	case <-stderr.seen:
	case err := <-done:
		t.Fatalf("report returned before a heartbeat: %v\n%s", err, stderr.String())
	}
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	require.NoError(t, <-done, stderr.String())
	require.Contains(t, stderr.String(), "report: running go test")
	require.Regexp(t, `report: still running, \d+s elapsed, \d+ benchmark results so far`, stderr.String())
}
