package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// heartbeat is how often the report says it is still running while the
// benchmarks compile and run.
var heartbeat = 30 * time.Second

// progressWriter passes the benchmark command's output to w and counts its
// benchmark result lines, for the heartbeat. It is safe for concurrent use.
type progressWriter struct {
	mu      sync.Mutex
	w       io.Writer
	results int
	partial bool // the last write ended inside a line
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for line := range bytes.Lines(b) {
		if !p.partial && bytes.HasPrefix(line, []byte("Benchmark")) && bytes.Contains(line, []byte(" ns/op")) {
			p.results++
		}
		p.partial = !bytes.HasSuffix(line, []byte("\n"))
	}
	return p.w.Write(b)
}

// heartbeat prints "still running" with the elapsed time and the results
// so far every interval, until the returned stop is called.
func (p *progressWriter) heartbeat(interval time.Duration) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.mu.Lock()
				fmt.Fprintf(p.w, "report: still running, %v elapsed, %d benchmark results so far\n",
					time.Since(start).Round(time.Second), p.results)
				p.mu.Unlock()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
