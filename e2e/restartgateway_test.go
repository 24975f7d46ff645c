package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A gateway restarted while another socket holds its port listens on a
// free one, says so, and the next restart goes there; any other error of
// the restart is returned as it is, with no gateway left. The attempt on the
// taken port releases the checkpoint path it claimed, so the retry takes it.
func TestRestartGatewayMovesOffATakenPort(t *testing.T) {
	defer leakcheck.Check(t)()
	taken, err := net.Listen("tcp", "127.0.0.1:0") // held for the whole test
	require.NoError(t, err)
	defer taken.Close()
	rc := kvroute.DefaultConfig()
	rc.Model = "m"
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	rc.Checkpoint = checkpoint.Config{Path: filepath.Join(t.TempDir(), "index.ckpt"), Interval: -1}
	c := &cluster{gwCfg: gateway.ServerConfig{Listen: taken.Addr().String(), Router: rc}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	var out bytes.Buffer
	require.NoError(t, c.restartGateway(context.Background(), c.gwCfg, &out))
	require.NotEqual(t, taken.Addr().String(), c.gw.Addr())
	require.Equal(t, c.gw.Addr(), c.gwCfg.Listen, "the next restart listens where this one does")
	require.Equal(t, "  (the gateway's port was taken while it was down: it now listens on "+c.gw.URL()+")\n", out.String())
	require.NotNil(t, c.gw.Router())
	require.NoError(t, c.gw.Shutdown(context.Background()))

	out.Reset()
	cfg := c.gwCfg
	cfg.Listen = "127.0.0.1:not-a-port"
	err = c.restartGateway(context.Background(), cfg, &out)
	require.ErrorContains(t, err, "gateway restart")
	require.Nil(t, c.gw)
	require.Empty(t, out.String())
	require.NotContains(t, c.gwCfg.Listen, "not-a-port", "a failed restart leaves the next one where it was")
}
