package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/kvindex"
)

// snapshotFixture is a warm index of a given size, its snapshot bytes and
// how long building it through Index.Store took (the cost a restart pays
// when it must rebuild from events instead of loading a snapshot).
type snapshotFixture struct {
	ix          *kvindex.Index
	data        []byte
	memberships int
	storeTime   time.Duration
}

var (
	snapFixMu sync.Mutex
	snapFix   = map[int]*snapshotFixture{}
)

// getSnapshotFixture builds (once per process) an index of memberships
// distinct blocks on 64 endpoints, as BenchmarkMemory does, and its
// snapshot. Only one size is kept at a time (10^7 needs about 1 GiB).
func getSnapshotFixture(b *testing.B, memberships int) *snapshotFixture {
	b.Helper()
	snapFixMu.Lock()
	defer snapFixMu.Unlock()
	if fx := snapFix[memberships]; fx != nil {
		return fx
	}
	for k, fx := range snapFix {
		fx.ix.Close()
		delete(snapFix, k)
	}
	runtime.GC()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	n, err := Background(ix, EndpointIDs(64), memberships, 256, 6)
	if err != nil {
		b.Fatal(err)
	}
	fx := &snapshotFixture{ix: ix, memberships: n, storeTime: time.Since(start)}
	var buf bytes.Buffer
	buf.Grow(n * 20)
	info, err := ix.WriteSnapshot(&buf)
	if err != nil {
		b.Fatal(err)
	}
	if info.Memberships != int64(n) {
		b.Fatalf("snapshot holds %d memberships, index %d", info.Memberships, n)
	}
	fx.data = buf.Bytes()
	snapFix[memberships] = fx
	return fx
}

// snapshotSizes are the benchmarked index sizes; 10^7 is skipped with
// -short.
var snapshotSizes = []int{1_000_000, 10_000_000}

func skipLarge(b *testing.B, n int) {
	if n >= 10_000_000 && testing.Short() {
		b.Skip("the 10^7-membership rung is skipped with -short")
	}
}

// BenchmarkSnapshotWrite measures Index.WriteSnapshot of a warm index into
// a counting writer: memberships/s and bytes/membership. Its floor is
// XXH64 over the same bytes (what any checksummed writer must at least
// do); x_floor is the ratio.
func BenchmarkSnapshotWrite(b *testing.B) {
	for _, n := range snapshotSizes {
		b.Run(fmt.Sprintf("memberships=%.0e", float64(n)), func(b *testing.B) {
			skipLarge(b, n)
			fx := getSnapshotFixture(b, n)
			floorStart := time.Now()
			_ = xxhash.Sum64(fx.data)
			floor := time.Since(floorStart)
			b.ReportAllocs()
			b.ResetTimer()
			var info kvindex.SnapshotInfo
			for i := 0; i < b.N; i++ {
				var err error
				if info, err = fx.ix.WriteSnapshot(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if info.Memberships != int64(fx.memberships) || info.Bytes != int64(len(fx.data)) {
				b.Fatalf("wrote %d memberships in %d bytes, want %d in %d", info.Memberships, info.Bytes, fx.memberships, len(fx.data))
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(fx.memberships)/per.Seconds(), "memberships/s")
			b.ReportMetric(float64(len(fx.data))/float64(fx.memberships), "bytes/membership")
			b.ReportMetric(float64(per)/float64(max(floor, 1)), "x_floor")
		})
	}
}

// BenchmarkSnapshotRead measures Index.ReadSnapshot of the snapshot into a
// fresh index (every check included): memberships/s. x_store is its time
// over the time storing the same blocks through Index.Store took (what a
// restart without a snapshot would pay even if the engines could replay
// everything).
func BenchmarkSnapshotRead(b *testing.B) {
	for _, n := range snapshotSizes {
		b.Run(fmt.Sprintf("memberships=%.0e", float64(n)), func(b *testing.B) {
			skipLarge(b, n)
			fx := getSnapshotFixture(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				info, err := ix.ReadSnapshot(bytes.NewReader(fx.data), kvindex.SnapshotReadOptions{})
				b.StopTimer()
				if err != nil || info.Memberships != int64(fx.memberships) || ix.Stats().Memberships != fx.memberships {
					b.Fatalf("read %d memberships (index %d), want %d: %v", info.Memberships, ix.Stats().Memberships, fx.memberships, err)
				}
				ix.Close()
				runtime.GC()
				b.StartTimer()
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(fx.memberships)/per.Seconds(), "memberships/s")
			b.ReportMetric(float64(per)/float64(fx.storeTime), "x_store")
		})
	}
}

// BenchmarkNewToCompleteIndex measures kvroute.New with a checkpoint file
// of 10^7 memberships (10^6 with -short): the time until New returns with
// the complete index (file read, every check, index built). Events are
// off, so nothing else runs.
func BenchmarkNewToCompleteIndex(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	fx := getSnapshotFixture(b, n)
	path := filepath.Join(b.TempDir(), "index.ckpt")
	if err := os.WriteFile(path, fx.data, 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = Model
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Checkpoint = checkpoint.Config{Path: path, Interval: -1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if got := r.Index().Stats().Memberships; got != fx.memberships {
			b.Fatalf("index holds %d memberships, want %d", got, fx.memberships)
		}
		r.Close() // rewrites the checkpoint: same content
		runtime.GC()
		b.StartTimer()
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(per.Seconds(), "s/complete-index")
	b.ReportMetric(float64(fx.memberships)/per.Seconds(), "memberships/s")
	b.ReportMetric(float64(fx.memberships), "memberships")
}

// BenchmarkMatchDuringSnapshot measures Match latency (a 2,048-token prompt
// against 64 candidates in an index of 10^6 memberships) while snapshots of
// the index are written back to back on another goroutine, against the
// same Match with no snapshot running, in the same run: p50/p99/max of
// both and the p99 ratio. Match takes no locks, so the snapshot may only
// cost it CPU, never a stall.
func BenchmarkMatchDuringSnapshot(b *testing.B) {
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	eps := EndpointIDs(64)
	if _, err := Background(ix, eps, 1_000_000, 256, 7); err != nil {
		b.Fatal(err)
	}
	prompt := Tokens(1<<57, 2048)
	steps := Steps(len(eps), len(prompt)/ix.BlockSize())
	if err := Staircase(ix, eps, prompt, steps, 1<<51); err != nil {
		b.Fatal(err)
	}
	keys := kvindex.Keys(nil, prompt, ix.BlockSize(), &kvindex.KeyParams{Model: Model})
	var out kvindex.MatchResult
	measure := func(n int) []time.Duration {
		lat := make([]time.Duration, n)
		for i := range lat {
			t0 := time.Now()
			ix.Match(keys, eps, &out)
			lat[i] = time.Since(t0)
		}
		if out.Endpoints()[len(eps)-1].Blocks != steps[len(eps)-1] {
			b.Fatalf("match found %d blocks, want %d", out.Endpoints()[len(eps)-1].Blocks, steps[len(eps)-1])
		}
		slices.Sort(lat)
		return lat
	}
	q := func(lat []time.Duration, p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) }
	b.ReportAllocs()
	b.ResetTimer()
	var quiet, busy []time.Duration
	var snapshots atomic.Int64
	for i := 0; i < b.N; i++ {
		quiet = measure(2000)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := ix.WriteSnapshot(io.Discard); err != nil {
					panic(err)
				}
				snapshots.Add(1)
			}
		}()
		// Match until at least one whole snapshot was written beside it: at
		// b.N = 1 a single batch of matches can end before the first does.
		start := snapshots.Load()
		busy = measure(2000)
		for snapshots.Load() == start {
			busy = append(busy, measure(2000)...)
		}
		slices.Sort(busy)
		close(stop)
		<-done
	}
	b.StopTimer()
	if snapshots.Load() == 0 {
		b.Fatal("no snapshot was written while matching")
	}
	b.ReportMetric(q(quiet, 0.5), "quiet-p50-ns")
	b.ReportMetric(q(quiet, 0.99), "quiet-p99-ns")
	b.ReportMetric(q(busy, 0.5), "busy-p50-ns")
	b.ReportMetric(q(busy, 0.99), "busy-p99-ns")
	b.ReportMetric(float64(busy[len(busy)-1]), "busy-max-ns")
	b.ReportMetric(q(busy, 0.99)/q(quiet, 0.99), "x_p99")
}
