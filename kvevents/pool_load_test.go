package kvevents

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// loadScript runs argv[2] libzmq PUB sockets (one engine each) on random
// loopback ports, printed on one line. Each stdin line "w" publishes one
// batch on every socket (subscriptions warm-up); "go <secs> <per>" then
// publishes, every second for secs seconds, per batches back to back on
// every socket (a burst of secs × per × engines in total), and prints the
// number of batches sent per engine.
const loadScript = `
import os, sys, time, zmq
d, n = sys.argv[1], int(sys.argv[2])
ctx = zmq.Context()
socks, payloads, topics = [], [], []
for i in range(n):
    s = ctx.socket(zmq.PUB)
    s.setsockopt(zmq.SNDHWM, 1000000)
    s.bind_to_random_port("tcp://127.0.0.1")
    socks.append(s)
    payloads.append(open(os.path.join(d, str(i)), "rb").read())
    topics.append(("kv@127.0.0.1:%d@test-model" % (20000 + i)).encode())
print(" ".join(s.getsockopt(zmq.LAST_ENDPOINT).decode() for s in socks), flush=True)
seq = 0
def send_all():
    global seq
    b = seq.to_bytes(8, "big")
    for i in range(n):
        socks[i].send_multipart([topics[i], b, payloads[i]])
    seq += 1
for line in sys.stdin:
    f = line.split()
    if f[0] == "w":
        send_all()
        print(seq, flush=True)
    elif f[0] == "go":
        secs, per = int(f[1]), int(f[2])
        t0 = time.time()
        for s in range(secs):
            for _ in range(per):
                send_all()
            time.sleep(max(0, t0 + s + 1 - time.time()))
        print(seq, flush=True)
for s in socks:
    s.close(linger=1000)
ctx.term()
`

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// TestPoolLoadHundredEndpoints measures the pool under 100 engines × 100
// batches/s of 16 blocks, sent as one burst per engine per second, with the
// old queue defaults (1,024 messages per worker, no byte bound) and the
// current ones, and reports drops and the pool process's CPU. It is a
// measurement, not a unit test: it runs only with KVROUTE_LOAD_TEST=1
// (KVROUTE_LOAD_SECONDS sets the duration, default 10).
func TestPoolLoadHundredEndpoints(t *testing.T) {
	if os.Getenv("KVROUTE_LOAD_TEST") != "1" {
		t.Skip("set KVROUTE_LOAD_TEST=1 to run the 100-endpoint load measurement")
	}
	pytest.Require(t)
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("KVROUTE_LOAD_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	for _, tc := range []struct {
		name string
		cfg  PoolConfig
	}{
		{"old-defaults(1024 msgs/worker)", PoolConfig{QueueSize: 1024, QueueBytes: 1 << 40, EndpointQueueBytes: 1 << 40}},
		{"new-defaults", PoolConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) { runLoad(t, tc.cfg, 100, 100, secs) })
	}
}

func runLoad(t *testing.T, cfg PoolConfig, engines, perSecond, secs int) {
	defer leakcheck.Check(t)()
	const blocks = 16
	dir := t.TempDir()
	var payloadBytes int
	for i := range engines {
		b := poolBatch(uint64(i), blocks)
		pl := wire.AppendBatch(nil, b, wire.FormatVLLM)
		payloadBytes = len(pl)
		require.NoError(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), pl, 0o600))
	}
	cmd := exec.Command(pytest.Python, "-c", loadScript, dir, strconv.Itoa(engines))
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	outPipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	out := bufio.NewReader(outPipe)
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	addrs := strings.Fields(line)
	require.Len(t, addrs, engines)

	ix := newPoolIndex(t)
	p, _ := newTestPool(t, cfg, ix)
	defer p.Close()
	ids := make([]string, engines)
	for i, a := range addrs {
		ids[i] = "127.0.0.1:" + strconv.Itoa(20000+i)
		require.NoError(t, p.Ensure(Endpoint{ID: ids[i], EventsAddress: a}))
	}
	require.Eventually(t, func() bool {
		_, _ = fmt.Fprintln(in, "w")
		_, err := out.ReadString('\n')
		require.NoError(t, err)
		for _, id := range ids {
			if st, _ := p.Status(id); !st.Received {
				return false
			}
		}
		return true
	}, poolWait, 50*time.Millisecond, "not every engine subscribed")
	m := p.metrics()
	dropsBefore := sumDrops(m, ids)

	cpu0, wall0 := cpuSeconds(), time.Now()
	_, _ = fmt.Fprintf(in, "go %d %d\n", secs, perSecond)
	line, err = out.ReadString('\n')
	require.NoError(t, err)
	last, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	require.NoError(t, err)
	last-- // the last sequence sent
	// Wait until every engine's last batch was handled (applied, or its
	// loss counted).
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if st, _ := p.Status(id); st.Applied < last && st.LastSeq < last {
				return false
			}
		}
		return p.metrics().PoolQueueBytes != nil && queueEmpty(p)
	}, 4*poolWait, 20*time.Millisecond)
	wall := time.Since(wall0).Seconds()
	cpu := cpuSeconds() - cpu0
	drops := sumDrops(m, ids) - dropsBefore
	sent := float64(secs * perSecond * engines)
	t.Logf("%d engines x %d batches/s of %d blocks (%d B each) for %d s, bursts of %d msgs: sent %.0f, dropped %.0f (%.2f%%), pool CPU %.1f s over %.1f s wall = %.0f%% of one core (GOMAXPROCS=%s)",
		engines, perSecond, blocks, payloadBytes, secs, perSecond*engines, sent, drops, 100*drops/sent, cpu, wall,
		100*cpu/wall, os.Getenv("GOMAXPROCS"))
	require.NoError(t, p.Close())
}

func queueEmpty(p *Pool) bool {
	for _, w := range p.workers {
		if w.queuedBytes() != 0 || len(w.q) != 0 {
			return false
		}
	}
	return true
}

func sumDrops(m *eventMetrics, ids []string) float64 {
	var n float64
	for _, id := range ids {
		n += counter(m.Dropped, id, string(dropQueueFull))
	}
	return n
}
