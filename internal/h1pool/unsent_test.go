package h1pool

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A request whose context ends before any byte of it reached the
// connection (a render hedge's loser canceled as the other answer came, on
// a machine too busy to have run its write yet) leaves the connection as
// it found it, between two exchanges: it goes back to the pool, not
// closed, and the next request reuses it. The context ends here in
// WroteRequest, once the request is in the write buffer and before its
// flush, the last moment at which nothing has been sent.
func TestTransportKeepsTheConnectionOfARequestCanceledUnsent(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newCountingServer(nil)
	defer e.Close()
	tr := New(Config{})
	defer tr.Close()
	_, _, err := upPost(t, context.Background(), tr, e.hostPort(), "first")
	require.NoError(t, err)
	require.Equal(t, 1, tr.IdleConns(e.hostPort()))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.hostPort()+"/v1/x", strings.NewReader("never sent"))
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, tr.Stats().Closes[CloseCanceled], "no byte was sent: nothing to abort")
	require.Equal(t, 1, tr.IdleConns(e.hostPort()), "the connection is back in the pool")

	code, body, err := upPost(t, context.Background(), tr, e.hostPort(), "second")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, `{"echo":"second"}`, body, "nothing of the canceled request was left in the connection")
	require.Equal(t, int64(1), e.accepted.Load(), "one connection carried both answers")
	require.Equal(t, int64(1), tr.Stats().Dials)
}
