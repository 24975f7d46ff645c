package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// The README's quickstart, built and run as a user would, in front of two
// simulated engines on 127.0.0.1 and 127.0.0.2: a prompt shorter than one
// 64-token block can never be a cache hit; a long prompt sent again goes to
// the same engine with its prefix cached, and the router saw the engines'
// KV events; Ctrl-C (SIGINT) stops it cleanly.
func TestQuickstartRoutesALongPromptToTheWarmEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quickstart binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the quickstart with")
	}
	defer leakcheck.Check(t)()
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	eventsPort, replayPort := sharedPort(t), sharedPort(t)
	e1 := startEngine(t, "127.0.0.1", eventsPort, replayPort)
	defer e1.Close()
	e2 := startEngine(t, "127.0.0.2", eventsPort, replayPort)
	defer e2.Close()

	listen := testport.Addr(t) // bound by the quickstart
	cmd := exec.Command(bin, "-listen", listen, "-endpoints", e1.Addr()+","+e2.Addr(),
		"-events-port", strconv.Itoa(eventsPort), "-replay-port", strconv.Itoa(replayPort))
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

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
	require.Equal(t, http.StatusOK, resp.StatusCode)
	stream := bufio.NewReader(resp.Body)
	line, err := stream.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)
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
