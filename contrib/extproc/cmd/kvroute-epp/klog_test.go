package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
)

// TestMain routes klog, as main does, to nowhere: client-go's leader
// election logs through klog, and its lines would otherwise fill the
// tests' output in klog's format.
func TestMain(m *testing.M) {
	routeKlog(io.Discard)
	os.Exit(m.Run())
}

// Through the writer main makes (routeKlog), client-go's leader election
// lines, which it logs through klog, are JSON lines among kvroute-epp's own
// with --zap-encoder json, on the same writer.
func TestKlogLinesFollowZapEncoder(t *testing.T) {
	defer leakcheck.Check(t)()
	shortLeases(t)
	logs := &syncbuf.Buffer{}
	w := routeKlog(logs)
	t.Cleanup(func() { routeKlog(io.Discard) })
	t.Setenv("POD_NAME", "router-epp-5d9c7b8f4-x2x1z")
	fakeKube(t, fake.NewClientset(readyPod("llm", "vllm-0", "127.0.0.1", map[string]string{"app": "vllm"})))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, done := startLoggedEPP(t, ctx, w, "--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000", "--pool-namespace", "llm",
		"--ha-enable-leader-election", "--zap-encoder", "json", "--readiness-interval", "10ms",
		"--config-text", fmt.Sprintf("model: %s\nblockSize: 16\nevents:\n  enabled: false\n", model))
	require.Eventually(t, func() bool {
		s := logs.String()
		return strings.Contains(s, "Successfully acquired lease") && strings.Contains(s, `"msg":"extproc: ready"`)
	}, 20*time.Second, 10*time.Millisecond, "client-go's line reaches kvroute-epp's writer, and the leader turns ready")
	cancel()
	require.NoError(t, <-done)

	var fromKlog map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON line: %s", line)
		if m["msg"] == "Successfully acquired lease" {
			fromKlog = m
		}
	}
	require.NotNil(t, fromKlog)
	require.Equal(t, "INFO", fromKlog["level"])
	require.Equal(t, "llm/epp-llm-router-epp.llm-d.ai", fromKlog["lock"], "klog's key-value pairs are the line's attributes")
}
