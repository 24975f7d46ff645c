package gatewaycmd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
)

// completePickerConfig is package llmd's fixture of a complete llm-d
// EndpointPickerConfig; llmd's tests hold what it translates to.
const completePickerConfig = "../../llmd/testdata/endpointpickerconfig.yaml"

// The gateway's --config takes an llm-d EndpointPickerConfig whole: the
// settings kvroute implements are translated, the rest are kept to be
// logged at start (--strict-config refuses them, naming them all), and
// flags still override the file.
func TestConfigFileTakesAWholeEndpointPickerConfig(t *testing.T) {
	o, err := parseFlags([]string{"--config", completePickerConfig, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	r := o.server.Router
	require.Equal(t, "Qwen/Qwen3-32B", r.Model)
	require.Equal(t, 32, r.BlockSize)
	require.Equal(t, 5559, r.Events.ReplayPort)
	require.Equal(t, 2.0, r.LoadWeight)
	require.Equal(t, "http://render.llm.svc:8000", r.Render.URL)
	require.Len(t, o.findings, 22)

	o, err = parseFlags([]string{"--config", completePickerConfig, "--endpoints", "10.0.0.1:8000", "--events-port", "7000", "--model", "other"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 7000, o.server.Router.Events.EventsPort)
	require.Equal(t, "other", o.server.Router.Model)

	_, err = parseFlags([]string{"--config", completePickerConfig, "--endpoints", "10.0.0.1:8000", "--strict-config"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "strict: 22 llm-d settings are not carried over")
	require.ErrorContains(t, err, "plugins[precise].parameters.tokenProcessorConfig.hashSeed: ignored: not needed")
	require.ErrorContains(t, err, "flowControl.maxRequests: kvroute does this differently")
	// The gateway runs no stage of the file: its session affinity and
	// admission are findings naming the gateway's own blocks.
	require.ErrorContains(t, err, "featureGates[flowControl]: kvroute does this differently (kvroute runs the admission stage (package admission; the gateway's admission block)")
}

// Run logs each finding of the --config file on a line of its own, then
// serves.
func TestRunLogsEveryFindingOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--config", completePickerConfig}, &stdout, &stderr, Options{})
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "serving on") }, 10*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	var lines []string
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.Contains(line, "llm-d setting not carried over") {
			lines = append(lines, line)
		}
	}
	require.Len(t, lines, 22, stderr.String())
	require.Contains(t, lines[0], "key=plugins[endpoint-notification-source] ")
	require.Contains(t, lines[0], "level=WARN")
	require.Contains(t, lines[len(lines)-1], "key=featureGates[flowControl] ")
}
