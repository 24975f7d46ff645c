package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/simengine/server"
)

const wait = 30 * time.Second

// sharedPort returns a TCP port free on both 127.0.0.1 and 127.0.0.2, as the
// quickstart expects every engine's event socket on the same port. It lies
// outside the ephemeral range (testport), so no other socket takes it
// before the engines bind it.
func sharedPort(t *testing.T) int {
	t.Helper()
	port, err := testport.Find(testport.Options{Hosts: []string{"127.0.0.1", "127.0.0.2"}})
	require.NoError(t, err)
	return port
}

// startEngine starts a simulated vLLM on host (HTTP on a free port, outside
// the ephemeral range as the others: it is bound after it was checked) that
// publishes KV events on host:eventsPort with replay on host:replayPort.
func startEngine(t *testing.T, host string, eventsPort, replayPort int) *server.Server {
	t.Helper()
	port, err := testport.Find(testport.Options{Hosts: []string{host}})
	require.NoError(t, err)
	id := net.JoinHostPort(host, strconv.Itoa(port))
	replay := fmt.Sprintf("tcp://%s:%d", host, replayPort)
	srv, err := server.New(server.Config{Model: "sim-model", EnableScaleOut: true,
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq",
			Endpoint: fmt.Sprintf("tcp://%s:%d", host, eventsPort), ReplayEndpoint: &replay,
			Topic: "kv@" + id + "@sim-model"}}, server.Options{})

	require.NoError(t, err)
	require.NoError(t, srv.Start(id))
	return srv
}

// built is the quickstart binary, built once for every test of the package
// in a directory TestMain removes.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
	skip string
}

// TestMain removes the quickstart binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildQuickstart builds the quickstart as a user would, the first time a
// test asks for it, and returns the binary's path.
func buildQuickstart(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			built.skip = "no go command to build the quickstart with"
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "quickstart"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "quickstart")
		built.out, built.err = exec.Command(goBin, "build", "-o", built.bin, ".").CombinedOutput()
	})
	if built.skip != "" {
		t.Skip(built.skip)
	}
	require.NoError(t, built.err, string(built.out))
	return built.bin
}

// quickstart is the quickstart binary running in front of two simulated
// engines on 127.0.0.1 and 127.0.0.2.
type quickstart struct {
	listen string
	cmd    *exec.Cmd
	exited chan error
	logs   *syncbuf.Buffer
}

// startQuickstart runs the quickstart, built as a user would, in
// front of two simulated engines; the test's cleanup stops all three.
func startQuickstart(t *testing.T) *quickstart {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the quickstart binary")
	}
	bin := buildQuickstart(t)

	eventsPort, replayPort := sharedPort(t), sharedPort(t)
	e1 := startEngine(t, "127.0.0.1", eventsPort, replayPort)
	t.Cleanup(func() { e1.Close() })
	e2 := startEngine(t, "127.0.0.2", eventsPort, replayPort)
	t.Cleanup(func() { e2.Close() })

	q := &quickstart{listen: testport.Addr(t), exited: make(chan error, 1), logs: &syncbuf.Buffer{}} // bound by the quickstart
	q.cmd = exec.Command(bin, "-listen", q.listen, "-endpoints", e1.Addr()+","+e2.Addr(),
		"-events-port", strconv.Itoa(eventsPort), "-replay-port", strconv.Itoa(replayPort))
	q.cmd.Stdout, q.cmd.Stderr = q.logs, q.logs
	require.NoError(t, q.cmd.Start())
	go func() { q.exited <- q.cmd.Wait() }()
	t.Cleanup(func() {
		if q.cmd.ProcessState == nil {
			_ = q.cmd.Process.Kill()
			<-q.exited
		}
	})
	return q
}

// streamStarted checks that resp streams an answer and reads its first chunk;
// it returns the rest of the stream.
func streamStarted(t *testing.T, resp *http.Response) *bufio.Reader {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	stream := bufio.NewReader(resp.Body)
	line, err := stream.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)
	return stream
}

// The README's quickstart, built and run as a user would, in front of two
// simulated engines on 127.0.0.1 and 127.0.0.2: a prompt shorter than one
// 64-token block can never be a cache hit; a long prompt sent again goes to
// the same engine with its prefix cached, and the router saw the engines'
// KV events; Ctrl-C (SIGINT) stops it cleanly.
func TestQuickstartRoutesALongPromptToTheWarmEngine(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the cleanups that stop the engines
	q := startQuickstart(t)
	listen, cmd, exited, logs := q.listen, q.cmd, q.exited, q.logs

	client := &http.Client{Transport: &http.Transport{}, Timeout: wait}
	defer client.CloseIdleConnections()
	post := func(prompt string) (endpoint string, cached int) {
		resp, err := client.Post("http://"+listen+"/v1/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"model":"sim-model","prompt":%q,"max_tokens":4}`, prompt)))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		cached, err = strconv.Atoi(resp.Header.Get("X-Kvroute-Cached-Tokens"))
		require.NoError(t, err)
		return resp.Header.Get("X-Kvroute-Endpoint"), cached
	}
	metrics := func() string {
		resp, err := client.Get("http://" + listen + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	require.Eventually(t, func() bool { return metrics() != "" }, wait, 20*time.Millisecond, logs.String())

	for range 3 {
		_, cached := post("Hi")
		require.Zero(t, cached, "a prompt shorter than one 64-token block is never a cache hit")
	}
	var long strings.Builder
	for i := range 400 {
		fmt.Fprintf(&long, "word%d ", i)
	}
	first, _ := post(long.String())
	// Once the engine's BlockStored reached the router, the prefix is cached
	// there (speculative entries alone would also say so for 2 s; the events
	// counter shows the engines' events arrived).
	require.Eventually(t, func() bool {
		return strings.Contains(metrics(), `llm_d_epp_kv_cache_events_messages_received_total{pod_identifier="`+first+`"}`)
	}, wait, 20*time.Millisecond)
	again, cached := post(long.String())
	require.Equal(t, first, again)
	require.Greater(t, cached, 0)

	// Ctrl-C while an answer streams: the quickstart stops taking
	// connections but finishes the answer (300 tokens of 10 ms steps) before
	// it exits; it used to exit at once and cut the stream.
	resp, err := client.Post("http://"+listen+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"sim-model","prompt":"Hi","max_tokens":300,"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	stream := streamStarted(t, resp)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	rest, err := io.ReadAll(stream)
	require.NoError(t, err, "the stream was cut: %s", logs.String())
	require.True(t, strings.HasSuffix(strings.TrimSpace(string(rest)), "data: [DONE]"), "the stream did not end: %q", rest)
	select {
	case err := <-exited:
		require.NoError(t, err, "Ctrl-C stops the quickstart cleanly: %s", logs.String())
	case <-time.After(wait):
		t.Fatal("the quickstart did not stop on SIGINT")
	}
}

// A second Ctrl-C stops the quickstart at once, while the first waits for
// the answers in flight: with a long answer streaming, the first used to
// leave the process waiting for its end and swallow every further Ctrl-C,
// so that only kill stopped it.
func TestQuickstartSecondCtrlCStopsAtOnce(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the cleanups that stop the engines
	q := startQuickstart(t)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var resp *http.Response
	require.Eventually(t, func() bool {
		var err error
		// 100,000 tokens of 10 ms steps: the answer outlasts the test.
		resp, err = client.Post("http://"+q.listen+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"sim-model","prompt":"Hi","max_tokens":100000,"stream":true}`))
		return err == nil
	}, wait, 20*time.Millisecond, q.logs.String())
	defer resp.Body.Close()
	stream := streamStarted(t, resp)

	require.NoError(t, q.cmd.Process.Signal(syscall.SIGINT))
	// The first Ctrl-C has been taken once the listener is closed.
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", q.listen)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, wait, 20*time.Millisecond, q.logs.String())
	require.NoError(t, q.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-q.exited:
		require.Error(t, err, "the second Ctrl-C interrupts the quickstart")
	case <-time.After(wait):
		t.Fatalf("the quickstart did not stop on a second SIGINT: %s", q.logs.String())
	}
	rest, _ := io.ReadAll(stream)
	require.NotContains(t, string(rest), "data: [DONE]", "the answer was cut")
}
