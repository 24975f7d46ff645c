package zmqpub

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Close itself ends the reader and writer goroutines of subscribers that
// stay connected: a subscriber that never sends another byte nor hangs up
// leaves no goroutine of the publisher behind, and finds its connection
// closed. The subscribers are raw TCP peers, so that the only goroutines
// the check can find are the publisher's.
func TestPublisherCloseEndsConnectedSubscribers(t *testing.T) {
	noLeak := leakcheck.Check(t)
	p := newTestPublisher(t, Config{Topic: "kv@a@m"})
	t.Cleanup(func() { _ = p.Close() })
	quiet := dialRawSub(t, p, 1)
	defer quiet.Close()
	subscribed := dialRawSub(t, p, 0)
	defer subscribed.Close()
	_, err := subscribed.Write([]byte{0x00, 4, 1, 'k', 'v', '@'}) // ZMTP 3.0 subscription message
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Stats().Subscribers == 2 && p.HasSubscription("kv@") },
		5*time.Second, time.Millisecond)

	require.NoError(t, p.Close())
	noLeak() // before the subscribers hang up
	if t.Failed() {
		return // the connections are still open: reading them would block
	}

	for _, c := range []io.Reader{quiet, subscribed} {
		_, err := io.Copy(io.Discard, c) // the publisher's greeting and READY, then EOF
		require.NoError(t, err, "the publisher closed the connection")
	}
}
