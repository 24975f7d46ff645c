package gatewaycmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/render"
)

func TestConfigFileGatewaySectionSetsClientLimits(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: Qwen/Qwen3-32B
blockSize: 16
gateway:
  maxBodyBytes: 1048576
  maxBodyBytesInFlight: 268435456
  readHeaderTimeout: 5s
  bodyReadTimeout: 45s
  idleTimeout: 90s
speculative:
  ttl: 3s
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	s := o.server
	require.Equal(t, int64(1<<20), s.Proxy.MaxBodyBytes)
	require.Equal(t, int64(256<<20), s.Proxy.MaxBodyBytesInFlight)
	require.Equal(t, 45*time.Second, s.Proxy.BodyReadTimeout)
	require.Equal(t, 5*time.Second, s.ReadHeaderTimeout)
	require.Equal(t, 90*time.Second, s.IdleTimeout)
	require.Equal(t, "Qwen/Qwen3-32B", s.Router.Model, "the router's keys around the section still load")
	require.Equal(t, 16, s.Router.BlockSize)
	require.Equal(t, 3*time.Second, s.Router.Speculative.TTL)

	o, err = parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000", "--max-body-bytes", "2048"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(2048), o.server.Proxy.MaxBodyBytes, "--max-body-bytes overrides the file")

	// Without the section every limit is zero: the proxy's defaults.
	o, err = parseFlags([]string{"--config", writeFile(t, "router.yaml", "model: m\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Zero(t, o.server.ReadHeaderTimeout)
	require.Zero(t, o.server.IdleTimeout)
	require.Zero(t, o.server.Proxy.BodyReadTimeout)
	require.Zero(t, o.server.Proxy.MaxBodyBytesInFlight)
	require.Equal(t, int64(gateway.DefaultMaxBodyBytes), o.server.Proxy.MaxBodyBytes)
}

func TestConfigFileGatewaySectionKeepsTheStrictRules(t *testing.T) {
	for content, want := range map[string]string{
		"gateway:\n  bodyReadTimeout: 30\n":                              "gateway.bodyReadTimeout: bare number 30 is not a duration",
		"gateway:\n  readHeaderTimout: 10s\n":                            "gateway.readHeaderTimout: unknown key",
		"gateway:\n  idleTimeout: -1s\n":                                 "gateway.idleTimeout: -1s is negative",
		"gateway:\n  maxBodyBytesInFlight: -5\n":                         "gateway.maxBodyBytesInFlight: -5 is negative",
		"gateway: [1]\n":                                                 "gateway",
		"gateway:\n  maxBodyBytes: 4096\n  maxBodyBytesInFlight: 1024\n": "below the body limit 4096",
		"gateway: {}\nspeculative:\n  tll: 2s\n":                         "speculative.tll: unknown key",
		// A block given as no object names its path, not a Go type.
		"gateway:\n  disagg: 7\n":             "gateway.disagg: want an object, got the number 7",
		"gateway:\n  session: [1]\n":          "gateway.session: want an object, got a list",
		"gateway:\n  disagg: {exchange: 5}\n": "gateway.disagg.exchange: want an object, got the number 5",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
	_, _, err := splitGatewaySection([]byte(`{"gateway":{},"model":"m","gateway":{}}`))
	require.ErrorContains(t, err, "gateway: key given twice")
	gw, rest, err := splitGatewaySection([]byte(`{"model":"m","gateway":{"idleTimeout":"1s"},"blockSize":16,"model":"n"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"idleTimeout":"1s"}`, string(gw))
	require.Equal(t, `{"model":"m","blockSize":16,"model":"n"}`, string(rest), "the router's keys keep their order and repetitions")
}

// The section reaches the running gateway: a body trickled past the
// configured bodyReadTimeout is answered 408 and its connection closed.
func TestRunAppliesTheGatewaySection(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := writeFile(t, "gateway.yaml", "events: {enabled: false}\ndisableRender: true\ngateway:\n  bodyReadTimeout: 300ms\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m", "--config", cfg}, &stdout, io.Discard, Options{})
	}()
	re := regexp.MustCompile(`serving on http://([0-9.:]+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(stdout.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 10*time.Second, 5*time.Millisecond)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 100000\r\n\r\n{")
	require.NoError(t, err)
	stop, dripped := make(chan struct{}), make(chan struct{})
	go func() { // one byte every 20 ms until the gateway hangs up
		defer close(dripped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, " "); err != nil {
					return
				}
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(body))
	require.True(t, strings.Contains(string(body), "300ms"), string(body))
	close(stop)
	<-dripped

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// FuzzSplitGatewaySection checks splitGatewaySection against encoding/json:
// a JSON object comes apart into its "gateway" member and the other
// members, unchanged; anything else comes back whole for LoadConfig.
func FuzzSplitGatewaySection(f *testing.F) {
	for _, s := range []string{`{"model":"m","gateway":{"idleTimeout":"1s"},"blockSize":16}`, `{"gateway":1,"gateway":2}`,
		`{"gat\u0065way":{}}`, `[]`, `{"a":1} {}`, `{"a":`, ` {"model" : "m" , "events" : {"enabled":false}} `, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gw, rest, err := splitGatewaySection(data)
		var all map[string]json.RawMessage
		isObject := json.Unmarshal(data, &all) == nil && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
		if !isObject {
			if err == nil {
				require.Equal(t, data, rest, "not an object: returned whole")
				require.Nil(t, gw)
			}
			return
		}
		if err != nil {
			require.ErrorContains(t, err, "gateway: key given twice")
			return
		}
		var got map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(rest, &got), "rest %q", rest)
		if want, ok := all[gatewaySection]; ok {
			require.Equal(t, string(want), string(gw))
			delete(all, gatewaySection)
		} else {
			require.Nil(t, gw)
		}
		require.Len(t, got, len(all))
		for k, v := range all {
			require.Equal(t, string(v), string(got[k]), "member %q", k)
		}
	})
}

func TestTokenizeOnceFromTheConfigFileAndTheFlag(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", "model: m\ngateway:\n  tokenizeOnce: [completions]\n")
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []render.API{render.APICompletions}, o.server.Proxy.TokenizeOnce)
	o, err = parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000", "--tokenize-once", ""}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Empty(t, o.server.Proxy.TokenizeOnce, "the flag overrides the file")
	o, err = parseFlags([]string{"--model", "m", "--endpoints", "10.0.0.1:8000", "--tokenize-once", "completions"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []render.API{render.APICompletions}, o.server.Proxy.TokenizeOnce)
}

// corsAllowedOrigins and corsAllowCredentials of the gateway section reach
// the gateway's configuration.
func TestCORSFromTheConfigFile(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", "model: m\ngateway:\n  corsAllowedOrigins: [\"https://app.example\"]\n  corsAllowCredentials: true\n")
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"https://app.example"}, o.server.Proxy.CORSAllowedOrigins)
	require.True(t, o.server.Proxy.CORSAllowCredentials)
}

// The gateway's own checks of tokenizeOnce and the CORS keys refuse the
// configuration file when it is read, with the error the gateway gives
// when it starts, naming the key.
func TestConfigFileRefusesWhatTheGatewayWouldRefuse(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"gateway:\n  tokenizeOnce: [chat_completions]\n", `gateway: tokenizeOnce cannot include "chat_completions"`},
		{"gateway:\n  tokenizeOnce: [completion]\n", `gateway: tokenizeOnce names unknown API "completion"`},
		{"gateway:\n  corsAllowedOrigins: [\"app.example\"]\n", `gateway: corsAllowedOrigins: "app.example" is not "*" or an origin`},
		{"gateway:\n  corsAllowedOrigins: [\"https://app.example/path\"]\n", `gateway: corsAllowedOrigins: "https://app.example/path"`},
		{"gateway:\n  corsAllowCredentials: true\n", "gateway: corsAllowCredentials needs corsAllowedOrigins"},
	} {
		_, _, _, err := loadConfigFile(writeFile(t, "c.yaml", "model: m\n"+tc.content), false)
		require.ErrorContains(t, err, tc.want, tc.content)
		_, err = parseFlags([]string{"--config", writeFile(t, "c.yaml", "model: m\n"+tc.content), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, tc.want, tc.content)
	}
}
