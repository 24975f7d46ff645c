package gatewaycmd

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// --help names the program as a user runs it, kvroute-gateway (the core
// build and the OpenTelemetry one alike), as every other kvroute binary's
// usage names its own.
func TestHelpNamesTheBinary(t *testing.T) {
	var out strings.Builder
	err := Run(context.Background(), []string{"--help"}, &out, io.Discard, Options{})
	require.True(t, err == nil || errors.Is(err, flag.ErrHelp), "%v", err)
	require.True(t, strings.HasPrefix(out.String(), "Usage of kvroute-gateway:\n"), out.String())
}

func TestParseFlagsDefaultsFollowTheDeploymentGuide(t *testing.T) {
	o, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000,10.0.0.2:8000", "--model", "Qwen/Qwen3-32B"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, ":8080", o.server.Listen)
	require.Equal(t, gateway.PolicyPrecise, o.server.Policy)
	require.Equal(t, "Qwen/Qwen3-32B", o.server.Router.Model)
	require.Equal(t, "Qwen/Qwen3-32B", o.server.Proxy.Model)
	require.True(t, *o.server.Router.Events.Enabled)
	require.Equal(t, 5556, o.server.Router.Events.EventsPort)
	require.True(t, *o.server.Router.Events.Replay)
	require.Equal(t, 5559, o.server.Router.Events.ReplayPort)
	require.Equal(t, int64(gateway.DefaultMaxBodyBytes), o.server.Proxy.MaxBodyBytes)
	require.Equal(t, []kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}}, o.server.Endpoints)
}

func TestParseFlagsOverridesTheConfigFile(t *testing.T) {
	cfg := writeFile(t, "router.json", `{"model":"from-file","events":{"eventsPort":7000,"replayPort":7001},"blockSize":16}`)
	eps := writeFile(t, "eps.json", `[{"id":"10.0.0.1:8000","labels":{"zone":"a"}}]`)

	o, err := parseFlags([]string{"--config", cfg, "--endpoints-file", eps}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "from-file", o.server.Router.Model)
	require.Equal(t, 7000, o.server.Router.Events.EventsPort)
	require.Equal(t, 7001, o.server.Router.Events.ReplayPort)
	require.Equal(t, 16, o.server.Router.BlockSize)
	require.Equal(t, map[string]string{"zone": "a"}, o.server.Endpoints[0].Labels)

	o, err = parseFlags([]string{"--config", cfg, "--endpoints-file", eps, "--model", "m", "--events-port", "6000", "--replay-port", "0"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "m", o.server.Router.Model)
	require.Equal(t, 6000, o.server.Router.Events.EventsPort)
	require.False(t, *o.server.Router.Events.Replay, "--replay-port 0 disables replay")
}

func TestParseFlagsRejectsBadInput(t *testing.T) {
	eps := writeFile(t, "eps.json", `[{"id":"10.0.0.1:8000"}]`)
	bad := writeFile(t, "bad.json", `{"model":"m","nosuchkey":1}`)
	for name, args := range map[string][]string{
		"no endpoints":      {"--model", "m"},
		"no model":          {"--endpoints", "a:1"},
		"both lists":        {"--model", "m", "--endpoints", "a:1", "--endpoints-file", eps},
		"bad endpoint":      {"--model", "m", "--endpoints", "nohost"},
		"unknown config":    {"--model", "m", "--endpoints", "a:1", "--config", bad},
		"missing config":    {"--model", "m", "--endpoints", "a:1", "--config", filepath.Join(t.TempDir(), "none.json")},
		"bad body limit":    {"--model", "m", "--endpoints", "a:1", "--max-body-bytes", "0"},
		"bad log level":     {"--model", "m", "--endpoints", "a:1", "--log-level", "loud"},
		"stray argument":    {"--model", "m", "--endpoints", "a:1", "extra"},
		"bad events port":   {"--model", "m", "--endpoints", "a:1", "--events-port", "70000"},
		"negative shutdown": {"--model", "m", "--endpoints", "a:1", "--shutdown-timeout", "-1s"},
	} {
		_, err := parseFlags(args, io.Discard, io.Discard)
		require.Error(t, err, name)
	}
	// A file that cannot be read is refused naming its flag, as --config's
	// is; --endpoints-file's used to say "open <file>: ..." alone.
	for _, flag := range []string{"--config", "--endpoints-file"} {
		missing := filepath.Join(t.TempDir(), "none.yaml")
		args := []string{"--model", "m", flag, missing}
		if flag == "--config" {
			args = append(args, "--endpoints", "a:1")
		}
		_, err := parseFlags(args, io.Discard, io.Discard)
		require.ErrorContains(t, err, flag+" "+missing+": ", flag)
	}
	// A negative replay port is refused, not read as "no replay" (0 is).
	_, err := parseFlags([]string{"--model", "m", "--endpoints", "a:1", "--replay-port", "-1"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--replay-port")
	_, err = parseFlags([]string{"--endpoints", "a:1"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--model")
	_, err = parseFlags([]string{"--endpoints", "a:1", "--policy", "round-robin"}, io.Discard, io.Discard)
	require.NoError(t, err, "round-robin needs no model")
}

func TestRunServesUntilCancelled(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := startRun(t, ctx)
	defer g.close()

	resp, body := g.complete(t)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"choices":[{"text":"ok"}]}`, string(body))
	require.Equal(t, g.id, resp.Header.Get(gateway.HeaderEndpoint))

	cancel()
	select {
	case err := <-g.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// runGateway is Run serving in a goroutine in front of one stub engine.
type runGateway struct {
	engine *httptest.Server
	id     string // the engine's endpoint ID
	url    string // the gateway's
	client *http.Client
	done   chan error      // Run's result
	stdout *syncbuf.Buffer // Run's output for the operator
}

// startRun starts Run with args after a stub engine's endpoint, a model and
// a configuration without KV events or render, and waits until it serves.
func startRun(t *testing.T, ctx context.Context, args ...string) *runGateway {
	t.Helper()
	g := &runGateway{
		engine: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"choices":[{"text":"ok"}]}`)
		})),
		client: &http.Client{Transport: &http.Transport{}},
		done:   make(chan error, 1),
		stdout: new(syncbuf.Buffer),
	}
	cfg := writeFile(t, "router.json", `{"events":{"enabled":false},"disableRender":true}`)
	g.id = strings.TrimPrefix(g.engine.URL, "http://")
	args = append([]string{"--listen", "127.0.0.1:0", "--endpoints", g.id, "--model", "m", "--config", cfg}, args...)
	go func() { g.done <- Run(ctx, args, g.stdout, io.Discard, Options{}) }()
	re := regexp.MustCompile(`serving on (http://[0-9.:]+)`)
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(g.stdout.String())
		if m != nil {
			g.url = m[1]
		}
		return m != nil
	}, 10*time.Second, 5*time.Millisecond)
	return g
}

// complete sends one completions request through the gateway.
func (g *runGateway) complete(t *testing.T) (*http.Response, []byte) {
	t.Helper()
	resp, err := g.client.Post(g.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi"}`))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	return resp, body
}

// close stops the client's connections and the engine; Run must have
// returned.
func (g *runGateway) close() {
	g.client.CloseIdleConnections()
	g.engine.Close()
}

// Under the round-robin policy there is no router, so no index to serve,
// checkpoint or load: --snapshot-listen, --checkpoint and --peers are
// refused by name, as the server refuses the gateway section's router
// features, rather than accepted and never acted on (no snapshot listener
// for the peers to bootstrap from, no checkpoint file written).
func TestRoundRobinRefusesTheIndexFlags(t *testing.T) {
	dir := t.TempDir()
	for flag, args := range map[string][]string{
		"--snapshot-listen": {"--snapshot-listen", "127.0.0.1:0"},
		"--checkpoint":      {"--checkpoint", filepath.Join(dir, "index.ckpt")},
		"--peers":           {"--peers", "http://10.0.0.5:9091/kvroute/snapshot"},
	} {
		_, err := parseFlags(append([]string{"--endpoints", "a:1", "--policy", "round-robin"}, args...), io.Discard, io.Discard)
		require.ErrorContains(t, err, flag+" needs the precise policy", flag)
		_, err = parseFlags(append([]string{"--endpoints", "a:1", "--model", "m"}, args...), io.Discard, io.Discard)
		require.NoError(t, err, "%s with the precise policy", flag)
	}
}

// An invalid peer token (a trailing newline, from a file read into the
// variable, say) is reported naming where the operator set it: --peer-token,
// $KVROUTE_PEER_TOKEN, or the config file's bootstrap.token; it was named
// bootstrap.token whatever its source. A valid one from any source is kept,
// the flag over the variable over the file.
func TestInvalidPeerTokenNamesItsSource(t *testing.T) {
	base := []string{"--endpoints", "a:1", "--model", "m"}
	t.Setenv("KVROUTE_PEER_TOKEN", "secret\n")
	_, err := parseFlags(base, io.Discard, io.Discard)
	require.ErrorContains(t, err, "$KVROUTE_PEER_TOKEN")
	require.NotContains(t, err.Error(), "bootstrap.token")

	t.Setenv("KVROUTE_PEER_TOKEN", "")
	_, err = parseFlags(append(base, "--peer-token", " secret"), io.Discard, io.Discard)
	require.ErrorContains(t, err, "--peer-token")
	require.NotContains(t, err.Error(), "bootstrap.token")

	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("bootstrap: {token: \"secret\\n\"}\n"), 0o600))
	_, err = parseFlags(append(base, "--config", cfg), io.Discard, io.Discard)
	require.ErrorContains(t, err, "bootstrap.token")

	// The variable overrides the file's token.
	require.NoError(t, os.WriteFile(cfg, []byte("bootstrap: {token: fromfile}\n"), 0o600))
	o, err := parseFlags(append(base, "--config", cfg), io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "fromfile", o.server.Router.Bootstrap.Token)
	t.Setenv("KVROUTE_PEER_TOKEN", "fromenv")
	o, err = parseFlags(append(base, "--config", cfg), io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "fromenv", o.server.Router.Bootstrap.Token)
	o, err = parseFlags(append(base, "--peer-token", "fromflag"), io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "fromflag", o.server.Router.Bootstrap.Token)
}

// --peers is read as --endpoints is: spaces around each URL are trimmed
// and an empty entry (a trailing comma) is skipped, so that
// "a, b," names a and b; a list with no URL at all is refused, as an
// --endpoints list with no endpoint is. A space or a trailing comma used to
// fail the peer URL check with a value the operator never meant as a URL.
func TestPeersFlagIsReadAsEndpointsIs(t *testing.T) {
	base := []string{"--model", "m"}
	eps, err := parseFlags(append(base, "--endpoints", " a:1 , b:2,"), io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []kvroute.Endpoint{{ID: "a:1"}, {ID: "b:2"}}, eps.server.Endpoints)

	o, err := parseFlags(append(base, "--endpoints", "a:1",
		"--peers", " http://10.0.0.5:9091/kvroute/snapshot , http://10.0.0.6:9091/kvroute/snapshot,"), io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"http://10.0.0.5:9091/kvroute/snapshot", "http://10.0.0.6:9091/kvroute/snapshot"},
		o.server.Router.Bootstrap.Peers)

	_, err = parseFlags(append(base, "--endpoints", " , "), io.Discard, io.Discard)
	require.Error(t, err)
	_, err = parseFlags(append(base, "--endpoints", "a:1", "--peers", " , "), io.Discard, io.Discard)
	require.ErrorContains(t, err, "--peers")
}
