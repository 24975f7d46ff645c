package pytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/syncbuf"
)

// Python is the interpreter the interop tests use.
const Python = "/usr/bin/python3"

// EnvRequire names the variable that turns a missing interpreter or module
// into a test failure instead of a skip.
const EnvRequire = "KVROUTE_REQUIRE_INTEROP"

// CommandTimeout bounds how long a command waits for the script's answer.
var CommandTimeout = 10 * time.Second

var (
	availOnce sync.Once
	availErr  error
)

// Available reports why the interop environment is unusable (nil when
// Python with zmq and msgpack works). The check runs once per process.
func Available() error {
	availOnce.Do(func() {
		if _, err := os.Stat(Python); err != nil {
			availErr = fmt.Errorf("pytest: %s not found: %w", Python, err)
			return
		}
		out, err := exec.Command(Python, "-c", "import zmq, msgpack; print(zmq.zmq_version())").CombinedOutput()
		if err != nil {
			availErr = fmt.Errorf("pytest: %s cannot import zmq and msgpack (install python3-zmq python3-msgpack): %v: %s",
				Python, err, bytes.TrimSpace(out))
			return
		}
		if _, err := os.Stat(ScriptPath()); err != nil {
			availErr = fmt.Errorf("pytest: script missing: %w", err)
		}
	})
	return availErr
}

// Require skips t when the interop environment is unusable, or fails it when
// KVROUTE_REQUIRE_INTEROP=1.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%v (%s=1)", err, EnvRequire)
		}
		t.Skipf("interop test skipped: %v", err)
	}
}

// ScriptPath is the absolute path of testdata/vllm_publisher.py.
func ScriptPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "vllm_publisher.py")
}

// Config selects the script's options; zero values take the script's defaults.
type Config struct {
	PubPort      int           // PUB port on 127.0.0.1 (0 = random); reuse it to restart on the same port
	Connect      string        // connect the PUB to this endpoint (kvroute binds) instead of binding
	DPRank       int           // data-parallel rank: the Connect endpoint's port is offset by it, as vLLM does
	Replay       bool          // serve replays on a ROUTER
	ReplayPort   int           // ROUTER port (0 = random)
	Layout       string        // "current" (default) or "legacy" replay replies
	ReplayHWM    int           // ROUTER send high-water mark (default libzmq's 1,000, as vLLM); replies past it are dropped
	ReplaySndBuf int           // ROUTER kernel send buffer in bytes (default the OS's)
	Topic        string        // default "kv@127.0.0.1:8000@test-model"
	StartSeq     uint64        // first sequence number (default 0)
	Buffer       int           // replay buffer in batches (default 10,000)
	Blocks       int           // blocks per generated batch (default 2)
	BlockSize    int           // tokens per block (default 16)
	HeartbeatIvl time.Duration // ZMQ_HEARTBEAT_IVL on the PUB (vLLM sets none)
	HWM          int           // PUB high-water mark (default 100,000, vLLM's)
	BatchShape   string        // "array" (default) or "map" (vLLM main's EventBatch encoding)
	Linger       time.Duration // PUB linger on stop (default 1 s)

	// Identity is vLLM's snapshot revision: "payload" (a 16-byte publisher
	// identity after the batch's rank, new on every restart), "frame" (an
	// earlier draft: appended to the sequence frame), SGLang's "topic" (the
	// identity's hex as the epoch after the topic, "\x00sgl-kv-epoch=",
	// without heartbeats) or "" (none). With vLLM's, the publisher also
	// sends an empty batch after HeartbeatEvery idle (default 1 s, vLLM's);
	// the "heartbeats off" command stops them.
	Identity       string
	HeartbeatEvery time.Duration
	// Format is the generated events' engine: "vllm" (default) or "trtllm"
	// (TensorRT-LLM's BlockStored: no extra_keys, group or kind).
	Format string
}

func (c Config) args() []string {
	a := []string{ScriptPath()}
	add := func(flag string, v string) { a = append(a, flag, v) }
	if c.PubPort != 0 {
		add("--pub-port", strconv.Itoa(c.PubPort))
	}
	if c.Connect != "" {
		add("--connect", c.Connect)
	}
	if c.DPRank != 0 {
		add("--dp-rank", strconv.Itoa(c.DPRank))
	}
	if c.Replay {
		a = append(a, "--replay")
	}
	if c.ReplayPort != 0 {
		add("--replay-port", strconv.Itoa(c.ReplayPort))
	}
	if c.Layout != "" {
		add("--layout", c.Layout)
	}
	if c.ReplayHWM != 0 {
		add("--replay-hwm", strconv.Itoa(c.ReplayHWM))
	}
	if c.ReplaySndBuf != 0 {
		add("--replay-sndbuf", strconv.Itoa(c.ReplaySndBuf))
	}
	if c.Topic != "" {
		add("--topic", c.Topic)
	}
	if c.StartSeq != 0 {
		add("--start-seq", strconv.FormatUint(c.StartSeq, 10))
	}
	if c.Buffer != 0 {
		add("--buffer", strconv.Itoa(c.Buffer))
	}
	if c.Blocks != 0 {
		add("--blocks", strconv.Itoa(c.Blocks))
	}
	if c.BlockSize != 0 {
		add("--block-size", strconv.Itoa(c.BlockSize))
	}
	if c.HeartbeatIvl > 0 {
		add("--heartbeat-ivl", strconv.FormatInt(c.HeartbeatIvl.Milliseconds(), 10))
	}
	if c.HWM != 0 {
		add("--hwm", strconv.Itoa(c.HWM))
	}
	if c.BatchShape != "" {
		add("--batch-shape", c.BatchShape)
	}
	if c.Linger != 0 {
		add("--linger", strconv.FormatInt(c.Linger.Milliseconds(), 10))
	}
	if c.Identity != "" {
		add("--identity", c.Identity)
	}
	if c.HeartbeatEvery > 0 {
		add("--heartbeat-every", strconv.FormatFloat(c.HeartbeatEvery.Seconds(), 'f', -1, 64))
	}
	if c.Format != "" {
		add("--format", c.Format)
	}
	return a
}

// Publisher is a running vllm_publisher.py process.
type Publisher struct {
	// PubAddr is the PUB endpoint ("tcp://127.0.0.1:port"), or the Connect
	// endpoint in connect mode.
	PubAddr string
	// ReplayAddr is the ROUTER endpoint, "" without Config.Replay.
	ReplayAddr string
	// PubPort and ReplayPort are the bound ports (0 when not bound), to
	// restart a publisher on the same ports.
	PubPort, ReplayPort int
	// Pid is the script's process ID.
	Pid int

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncbuf.Buffer
	cmdMu  sync.Mutex
	quit   chan struct{} // closed by Stop and Kill: stdout lines are discarded
	qonce  sync.Once
	done   chan struct{} // closed when the process has been waited for
}

// Start runs the script, waits for its address line, and registers Stop as a
// cleanup. Tests that use leakcheck must also `defer p.Stop()` (deferred after
// leakcheck.Check, so it runs first): cleanups run after deferred calls.
func Start(t testing.TB, cfg Config) *Publisher {
	t.Helper()
	Require(t)
	p, err := start(cfg)
	if err != nil {
		t.Fatalf("pytest: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

func start(cfg Config) (*Publisher, error) {
	cmd := exec.Command(Python, cfg.args()...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Publisher{cmd: cmd, stdin: stdin, lines: make(chan string, 16), stderr: &syncbuf.Buffer{},
		quit: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-p.quit:
			}
		}
	}()
	go func() {
		<-readerDone // Wait closes stdout: read everything first
		_ = cmd.Wait()
		close(p.done)
	}()
	var hello struct {
		Pub    string  `json:"pub"`
		Replay *string `json:"replay"`
		Pid    int     `json:"pid"`
	}
	if err := p.readJSON(&hello); err != nil {
		_ = p.Kill()
		return nil, fmt.Errorf("starting %s: %w (stderr: %s)", ScriptPath(), err, p.stderr.String())
	}
	p.PubAddr, p.Pid = hello.Pub, hello.Pid
	if hello.Replay != nil {
		p.ReplayAddr = *hello.Replay
		p.ReplayPort = portOf(p.ReplayAddr)
	}
	if cfg.Connect == "" {
		p.PubPort = portOf(p.PubAddr)
	}
	return p, nil
}

func portOf(ep string) int {
	i := strings.LastIndexByte(ep, ':')
	n, _ := strconv.Atoi(ep[i+1:])
	return n
}

func (p *Publisher) readJSON(v any) error {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return errors.New("publisher exited")
		}
		return json.Unmarshal([]byte(line), v)
	case <-time.After(CommandTimeout):
		return errors.New("no answer from publisher")
	}
}

// Answer is the script's reply to a command.
type Answer struct {
	OK              bool    `json:"ok"`
	Error           string  `json:"error"`
	First           *uint64 `json:"first"`
	Last            *uint64 `json:"last"`
	NextSeq         uint64  `json:"next_seq"`
	Buffered        int     `json:"buffered"`
	ReplayRequests  int     `json:"replay_requests"`
	InvalidRequests int     `json:"invalid_requests"`
	Subscribers     int     `json:"subscribers"`
	Life            int     `json:"life"`         // engine lifetime: 0, +1 per Restart
	PublisherID     string  `json:"publisher_id"` // hex of the current identity ("" without Config.Identity)
	Heartbeats      int     `json:"heartbeats"`   // empty batches sent
}

// Command sends one command line (see the script's doc) and returns the answer.
func (p *Publisher) Command(line string) (Answer, error) {
	p.cmdMu.Lock()
	defer p.cmdMu.Unlock()
	var a Answer
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return a, fmt.Errorf("pytest: %q: %w", line, err)
	}
	if err := p.readJSON(&a); err != nil {
		return a, fmt.Errorf("pytest: %q: %w (stderr: %s)", line, err, p.stderr.String())
	}
	if !a.OK {
		return a, fmt.Errorf("pytest: %q: %s", line, a.Error)
	}
	return a, nil
}

// Publish sends n generated BlockStored batches and returns their first and
// last sequence numbers.
func (p *Publisher) Publish(n int) (first, last uint64, err error) {
	return p.publish(fmt.Sprintf("publish %d", n))
}

// Hide buffers n generated batches for replay without sending them live.
func (p *Publisher) Hide(n int) (first, last uint64, err error) {
	return p.publish(fmt.Sprintf("hide %d", n))
}

// PublishPayloads publishes each payload (raw msgpack) as one batch.
func (p *Publisher) PublishPayloads(payloads ...[]byte) (first, last uint64, err error) {
	var b strings.Builder
	b.WriteString("publish-hex")
	for _, pl := range payloads {
		b.WriteByte(' ')
		b.WriteString(hex.EncodeToString(pl))
	}
	return p.publish(b.String())
}

func (p *Publisher) publish(line string) (first, last uint64, err error) {
	a, err := p.Command(line)
	if err != nil {
		return 0, 0, err
	}
	if a.First == nil {
		return 0, 0, fmt.Errorf("pytest: %q published nothing", line)
	}
	last = *a.First
	if a.Last != nil {
		last = *a.Last
	}
	return *a.First, last, nil
}

// Burst publishes n batches as fast as the script can: with a small HWM
// libzmq drops what the subscriber has not taken, silently, as vLLM's PUB
// does.
func (p *Publisher) Burst(n int) (first, last uint64, err error) {
	return p.publish("burst " + strconv.Itoa(n))
}

// Restart restarts the engine in-process on the same ports: sequences start
// at 0 again with an empty replay buffer, the generated batches change
// (lifetime + 1), and k batches are published at once, before a subscriber
// can have re-dialled. ok is false when k is 0.
func (p *Publisher) Restart(k int) (first, last uint64, ok bool, err error) {
	a, err := p.Command("restart " + strconv.Itoa(k))
	if err != nil {
		return 0, 0, false, err
	}
	if !a.OK {
		return 0, 0, false, fmt.Errorf("pytest: restart: %s", a.Error)
	}
	if a.First == nil || a.Last == nil {
		return 0, 0, false, nil
	}
	return *a.First, *a.Last, true, nil
}

// Heartbeats turns the idle heartbeats of a publisher with Config.Identity
// on or off; off keeps its sockets open (a wedged publisher thread).
func (p *Publisher) Heartbeats(on bool) error {
	arg := "off"
	if on {
		arg = "on"
	}
	_, err := p.Command("heartbeats " + arg)
	return err
}

// Status returns the script's counters.
func (p *Publisher) Status() (Answer, error) { return p.Command("status") }

// Signal sends sig to the process (SIGSTOP/SIGCONT to freeze an engine).
func (p *Publisher) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill SIGKILLs the process (an engine crash) and waits for it.
func (p *Publisher) Kill() error {
	p.qonce.Do(func() { close(p.quit) })
	_ = p.cmd.Process.Kill()
	return p.wait()
}

// Stop asks the script to exit, kills it if it does not within 5 s, and waits.
// It is idempotent and safe after Kill.
func (p *Publisher) Stop() error {
	select {
	case <-p.done:
		return p.wait()
	default:
	}
	p.qonce.Do(func() { close(p.quit) })
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to exit
	_, _ = io.WriteString(p.stdin, "stop\n")
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
	}
	return p.wait()
}

func (p *Publisher) wait() error {
	<-p.done
	return nil
}

// Stderr returns what the script wrote to stderr so far.
func (p *Publisher) Stderr() string { return p.stderr.String() }

// Run runs a Python snippet with /usr/bin/python3 -c (args become sys.argv[1:])
// and returns its combined output; ctx bounds it. Callers check Require first.
func Run(ctx context.Context, code string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, Python, append([]string{"-c", code}, args...)...).CombinedOutput()
}
