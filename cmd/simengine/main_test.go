package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--model", "m", "--port", "0", "--block-size", "16", "--num-gpu-blocks", "100",
		"--max-num-batched-tokens", "512", "--enable-scale-out", "--kv-events-format", "legacy",
		"--kv-events-config", `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":100,"topic":"kv@x@m"}`,
		"--prefill-tokens-per-second", "5000", "--decode-step", "5ms", "--time-scale", "0.5", "--lora-modules", "a,b"})
	require.NoError(t, err)
	require.Equal(t, "m", o.cfg.Model)
	require.Equal(t, 0, o.port)
	require.Equal(t, "127.0.0.1", o.host)
	require.Equal(t, 16, o.cfg.Engine.BlockSize)
	require.Equal(t, 100, o.cfg.Engine.NumGPUBlocks)
	require.Equal(t, 512, o.cfg.Engine.MaxNumBatchedTokens)
	require.True(t, o.cfg.EnableScaleOut)
	require.Equal(t, "legacy", o.cfg.KVEventsFormat)
	require.True(t, o.cfg.KVEvents.Active())
	require.Equal(t, "tcp://*:5558", *o.cfg.KVEvents.ReplayEndpoint)
	require.Equal(t, 100, o.cfg.KVEvents.BufferSteps)
	require.Equal(t, 5000.0, o.cfg.Engine.PrefillTokensPerSecond)
	require.Equal(t, 5*time.Millisecond, o.cfg.Engine.DecodeStep)
	require.Equal(t, 0.5, o.cfg.Engine.TimeScale)
	require.Equal(t, []string{"a", "b"}, o.cfg.LoRAModules)

	o, err = parseFlags([]string{"--pd-role", "prefill", "--pd-engine-id", "p0", "--kv-transfer-time-per-token", "2us",
		"--kv-lease-ttl", "1m", "--kv-load-failure-policy", "fail", "--kv-transfer-timeout", "3s", "--pd-advertise-host", "10.0.0.2"})
	require.NoError(t, err)
	require.Equal(t, server.PDConfig{Role: "prefill", EngineID: "p0", AdvertiseHost: "10.0.0.2", TransferTimePerToken: 2 * time.Microsecond,
		TransferTimeout: 3 * time.Second, LeaseTTL: time.Minute, KVLoadFailurePolicy: "fail"}, o.cfg.PD)

	o, err = parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, 64, o.cfg.Engine.BlockSize)
	require.Equal(t, 8000, o.port)
	require.False(t, o.cfg.KVEvents.Active())
	require.False(t, o.cfg.EnableScaleOut)
	require.Equal(t, server.RoleBoth, o.cfg.PD.Role)

	_, err = parseFlags([]string{"--kv-events-config", `{"enable_kv_cache_events":true,"bogus":1}`})
	require.ErrorIs(t, err, server.ErrBadKVEventsConfig)
	_, err = parseFlags([]string{"extra"})
	require.Error(t, err)
}

// The --kv-events-config example in the help, the command's doc and the
// README's simengine commands use the ports the gateway subscribes to by
// default, so an engine started from them is found without port flags.
func TestHelpAndDocsUseTheGatewaysDefaultPorts(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	_, perr := parseFlags([]string{"--help"})
	os.Stdout = stdout
	require.NoError(t, w.Close())
	help, err := io.ReadAll(r)
	require.NoError(t, err)
	require.ErrorIs(t, perr, flag.ErrHelp)

	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	want := fmt.Sprintf(`"endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d"`, kvevents.DefaultEventsPort, kvevents.DefaultReplayPort)
	require.Contains(t, string(help), want)
	require.Contains(t, string(doc), want)
	ports := regexp.MustCompile(`"(?:endpoint|replay_endpoint)":"tcp://[^"]*:(\d+)"`)
	for name, text := range map[string]string{"help": string(help), "doc.go": string(doc), "README.md": string(readme)} {
		for _, m := range ports.FindAllStringSubmatch(text, -1) {
			require.Contains(t, []string{strconv.Itoa(kvevents.DefaultEventsPort), strconv.Itoa(kvevents.DefaultReplayPort)}, m[1],
				"%s: %s", name, m[0])
		}
	}
}

// An error that already names the engine is printed with the command's
// name once ("simengine: invalid --kv-events-config: ..."), not twice.
func TestErrorsNameTheCommandOnce(t *testing.T) {
	err := run([]string{"--kv-events-config", "{bad"})
	require.Error(t, err)
	var b bytes.Buffer
	require.Equal(t, 1, cliflag.Report(&b, "simengine", err))
	require.True(t, strings.HasPrefix(b.String(), "simengine: invalid --kv-events-config"), b.String())
	require.Equal(t, 1, strings.Count(b.String(), "simengine:"), b.String())
}
