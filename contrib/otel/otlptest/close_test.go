package otlptest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// An export handler still running when Close is called has returned when
// Close returns, though the gRPC server's Stop does not wait for it: Close
// is called while the handler waits for its cancelled context, the handler
// goes on only once its client has seen the connection close (Stop has
// returned by then), and Close must not return before it does.
func TestCloseWaitsForARunningExport(t *testing.T) {
	defer leakcheck.Check(t)()
	entered, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	r, err := newGRPC(func(ctx context.Context) {
		close(entered)
		<-ctx.Done() // Stop cancels the running handlers
		<-release
		returned.Store(true)
	})
	require.NoError(t, err)
	conn, err := grpc.NewClient(strings.TrimPrefix(r.Endpoint, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()

	exported := make(chan error, 1)
	go func() {
		_, err := coltracepb.NewTraceServiceClient(conn).Export(context.Background(), &coltracepb.ExportTraceServiceRequest{})
		exported <- err
	}()
	<-entered
	closed := make(chan bool, 1)
	go func() {
		r.Close()
		closed <- returned.Load()
	}()
	require.Error(t, <-exported, "the server closed the export's connection")
	close(release)
	require.True(t, <-closed, "the handler had returned when Close returned")
}
