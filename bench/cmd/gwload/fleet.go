package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// Fleet-run constants: each message stores fleetBlocks new blocks of
// fleetBlockSize tokens and removes the blocks of the message fleetKeep
// earlier, as an engine's prefix cache turns over, so the index stays
// bounded (fleetKeep × fleetBlocks blocks per endpoint) however long it
// runs.
const (
	fleetBlocks    = 16
	fleetBlockSize = 16
	fleetKeep      = 8
	fleetModel     = "sim-model"
)

// poolArgs configure a pool child.
type poolArgs struct {
	Endpoints []kvevents.Endpoint `json:"endpoints"`
}

// poolStats is a pool child's answer to "stats".
type poolStats struct {
	Connected int     `json:"connected"`
	Messages  uint64  `json:"messages"`
	Dropped   float64 `json:"dropped"`
	// DropReasons splits Dropped by its reason label.
	DropReasons map[string]float64 `json:"dropReasons"`
	Gaps        float64            `json:"gaps"`
	RSS         int64              `json:"rss"`
	HeapInuse   uint64             `json:"heapInuse"`
	Goroutines  int                `json:"goroutines"`
}

// runPool runs a kvevents.Pool with default settings subscribed to the
// given publishers until stdin closes, answering "stats".
func runPool(raw []byte) error {
	var a poolArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	ix, err := kvindex.New(kvindex.Config{BlockSize: fleetBlockSize}, kvindex.Options{})
	if err != nil {
		return err
	}
	defer ix.Close()
	reg := prometheus.NewRegistry()
	p, err := kvevents.NewPool(kvevents.PoolConfig{}, ix, kvevents.Options{Set: telemetry.Set{Registerer: reg}})
	if err != nil {
		return err
	}
	defer p.Close()
	for _, e := range a.Endpoints {
		if err := p.Ensure(e); err != nil {
			return err
		}
	}
	if err := printJSON(struct{}{}); err != nil {
		return err
	}
	commandLoop(func(string) any {
		var st poolStats
		for _, e := range a.Endpoints {
			if s, ok := p.Status(e.ID); ok {
				if s.Connected {
					st.Connected++
				}
				st.Messages += s.Messages
			}
		}
		st.DropReasons = countersBy(reg, "kvroute_kv_events_dropped_total", "reason")
		for _, n := range st.DropReasons {
			st.Dropped += n
		}
		st.Gaps = sumCounters(reg, "kvroute_kv_events_sequence_gaps_total")
		st.RSS, _ = rssBytes("self")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st.HeapInuse, st.Goroutines = ms.HeapInuse, runtime.NumGoroutine()
		return st
	})
	return nil
}

// sumCounters sums every series of the counter family name.
func sumCounters(g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return -1
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// countersBy sums the counter family name by the value of label.
func countersBy(g prometheus.Gatherer, name, label string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					v = lp.GetValue()
				}
			}
			out[v] += m.GetCounter().GetValue()
		}
	}
	return out
}

// fleetBatch is message seq of endpoint i.
func fleetBatch(i int, seq uint64) *wire.Batch {
	hashes := func(s uint64) []uint64 {
		h := make([]uint64, fleetBlocks)
		for j := range h {
			h[j] = uint64(i)<<40 | s<<8 | uint64(j)
		}
		return h
	}
	toks := make([]uint32, fleetBlocks*fleetBlockSize)
	for k := range toks {
		toks[k] = uint32((uint64(i)*7919 + seq*104729 + uint64(k)) % 50000)
	}
	b := &wire.Batch{TS: float64(seq), HasDPRank: true, Events: []wire.Event{{
		Type: wire.EventBlockStored, BlockHashes: hashes(seq), TokenIDs: toks,
		BlockSize: fleetBlockSize, Medium: "GPU",
	}}}
	if seq >= fleetKeep {
		b.Events = append(b.Events, wire.Event{Type: wire.EventBlockRemoved, BlockHashes: hashes(seq - fleetKeep), Medium: "GPU"})
	}
	return b
}

// runFleet measures one event pool (in a child process) subscribed to
// o.fleet publishers (in this process) on loopback: memory idle, then CPU,
// memory and drops while every publisher sends o.fleetRate messages/s.
func runFleet(o options, stdout io.Writer) (err error) {
	env := captureEnv()
	pubs := make([]*publish.Publisher, 0, o.fleet)
	defer func() {
		for _, p := range pubs {
			err = errors.Join(err, p.Close())
		}
	}()
	eps := make([]kvevents.Endpoint, o.fleet)
	for i := range o.fleet {
		id := fmt.Sprintf("10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255)
		p, err := publish.New(publish.Config{Addr: "tcp://127.0.0.1:0", Endpoint: id, Model: fleetModel}, publish.Options{})
		if err != nil {
			return err
		}
		pubs = append(pubs, p)
		eps[i] = kvevents.Endpoint{ID: id, Model: fleetModel, EventsAddress: p.Endpoint()}
	}
	pool, err := startChild("", "event pool", "pool", poolArgs{Endpoints: eps})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pool.stop()) }()
	var st poolStats
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := pool.call("stats", &st); err != nil {
			return err
		}
		subs := 0
		for _, p := range pubs {
			if p.Stats().Subscribers > 0 {
				subs++
			}
		}
		if st.Connected == o.fleet && subs == o.fleet {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 2 min %d of %d subscriptions connected", min(st.Connected, subs), o.fleet)
		}
		time.Sleep(100 * time.Millisecond) // polling a status, not synchronising
	}
	// Idle: subscribed, nothing published.
	cpu0, _ := pool.cpu()
	time.Sleep(5 * time.Second)
	cpu1, _ := pool.cpu()
	var idle poolStats
	if err := pool.call("stats", &idle); err != nil {
		return err
	}
	idleCPU := cpu1 - cpu0

	// Load: every publisher sends fleetRate msgs/s. Engines do not publish
	// in lockstep, so the publishers are split into ten groups and one group
	// takes its turn every 10 ms, sending what its publishers owe by then
	// (a tick that comes late is caught up, so the rate holds on a busy
	// machine).
	seq := make([]uint64, o.fleet)
	payload := make([]byte, 0, 4096)
	selfCPU0, _ := procCPU("self")
	cpu0, _ = pool.cpu()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	sent := 0
	for n := 0; time.Since(start) < o.fleetWindow; n++ {
		<-tick.C
		owed := uint64(time.Since(start).Seconds() * o.fleetRate)
		for i := n % 10; i < len(pubs); i += 10 {
			for ; seq[i] < owed; seq[i]++ {
				payload = wire.AppendBatch(payload[:0], fleetBatch(i, seq[i]), wire.FormatVLLM)
				if _, err := pubs[i].Publish(payload); err != nil {
					tick.Stop()
					return err
				}
				sent++
			}
		}
	}
	tick.Stop()
	wall := time.Since(start)
	cpu1, _ = pool.cpu()
	selfCPU1, _ := procCPU("self")
	var load poolStats
	if err := pool.call("stats", &load); err != nil {
		return err
	}
	// Let the queues drain, then count what arrived.
	var after poolStats
	for end := time.Now().Add(30 * time.Second); ; {
		if err := pool.call("stats", &after); err != nil {
			return err
		}
		if after.Messages-idle.Messages+uint64(after.Dropped-idle.Dropped) >= uint64(sent) || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a counter, not synchronising
	}
	env.finish()
	var pubDropped uint64
	for _, p := range pubs {
		pubDropped += p.Stats().Dropped
	}
	var b strings.Builder
	b.WriteString("# Event pool at fleet scale\n\n")
	env.header(&b, "go run ./bench/cmd/gwload "+strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "One `kvevents.Pool` (default config) in a child process, subscribed over loopback TCP to %d `publish.Publisher`s in the parent, "+
		"each sending %.0f messages/s (one BlockStored of %d blocks × %d tokens and one BlockRemoved of the blocks stored %d messages earlier) for %v, in ten staggered groups (one every 10 ms). "+
		"CPU is the pool process's user + system time over the window ÷ wall time.\n\n",
		o.fleet, o.fleetRate, fleetBlocks, fleetBlockSize, fleetKeep, o.fleetWindow)
	b.WriteString("| endpoints | msgs/s each | msgs/s total | RSS idle | Go heap idle | CPU idle | RSS under load | Go heap under load | pool CPU under load | sent | applied | dropped (pool) | dropped (publishers) | gaps | goroutines |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.1f MB | %.1f MB | %.1f%% | %.1f MB | %.1f MB | %.1f%% of a core | %d | %d | %.0f | %d | %.0f | %d |\n",
		o.fleet, o.fleetRate, float64(sent)/wall.Seconds(), mb(idle.RSS), mb(int64(idle.HeapInuse)), 100*idleCPU.Seconds()/5,
		mb(load.RSS), mb(int64(load.HeapInuse)), 100*(cpu1-cpu0).Seconds()/wall.Seconds(), sent, after.Messages-idle.Messages,
		after.Dropped-idle.Dropped, pubDropped, after.Gaps-idle.Gaps, load.Goroutines)
	for reason, n := range after.DropReasons {
		if n > 0 {
			fmt.Fprintf(&b, "\nPool drops with reason %q (whole run): %.0f.\n", reason, n)
		}
	}
	fmt.Fprintf(&b, "\nThe publishers (this process) used %.1f%% of a core.\n", 100*(selfCPU1-selfCPU0).Seconds()/wall.Seconds())
	path := filepath.Join(o.out, "fleet.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, b.String())
	return nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }
