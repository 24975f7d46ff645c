package zmqpub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestSubscriptionsBoundedInCountAndBytes checks a subscriber's bounds: a
// new prefix beyond maxSubscriptions or maxSubscriptionBytes is refused and
// changes nothing, while repeats and cancellations of held prefixes apply and
// cancelling frees room.
func TestSubscriptionsBoundedInCountAndBytes(t *testing.T) {
	s := newPubSubscriber(nil, 1)
	for i := range maxSubscriptions {
		require.True(t, s.subscribe(fmt.Appendf(nil, "t%04d", i), true))
	}
	require.False(t, s.subscribe([]byte("one-more"), true), "a prefix beyond the count bound is refused")
	require.True(t, s.subscribe([]byte("t0000"), true), "a held prefix may be repeated")
	require.Len(t, *s.topics.Load(), maxSubscriptions)
	require.True(t, s.subscribe([]byte("t0001"), false))
	require.True(t, s.subscribe([]byte("one-more"), true), "a cancellation frees room")
	require.False(t, s.subscribe([]byte("another"), true))

	s = newPubSubscriber(nil, 1)
	long := strings.Repeat("x", 1000)
	n := 0
	for ; s.subscribe([]byte(fmt.Sprintf("%03d%s", n, long)), true); n++ {
	}
	require.Equal(t, maxSubscriptionBytes/1003, n, "prefixes are admitted up to the byte bound")
	require.LessOrEqual(t, s.bytes, maxSubscriptionBytes)
	require.True(t, s.subscribe([]byte("short"), true), "a prefix that fits is admitted")
	require.True(t, s.subscribe([]byte("000"+long), false))
	require.Equal(t, n*1003+len("short")-1003, s.bytes)
}

// TestPublisherCountsRefusedSubscriptions sends a subscriber's prefixes
// beyond the bound over the wire: they are refused and counted in Stats and
// kvroute_publisher_refused_subscriptions_total, the connection stays, and
// a subscription after a cancellation is honoured.
func TestPublisherCountsRefusedSubscriptions(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, Config{Topic: "kv@a@m"}, Options{Set: telemetry.Set{Registerer: reg}})
	defer p.Close()
	c := dialRawSub(t, p, 0)
	defer c.Close()
	msg := func(flag byte, topic string) []byte { // a one-frame ZMTP message
		return append([]byte{0x00, byte(1 + len(topic)), flag}, topic...)
	}
	const extra = 10
	var b []byte
	for i := range maxSubscriptions + extra {
		b = append(b, msg(1, fmt.Sprintf("t%04d", i))...)
	}
	b = append(b, msg(1, "kv@")...) // beyond the bound too
	_, err := c.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Stats().Refused == extra+1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 1, p.Stats().Subscribers)
	require.Equal(t, 0, p.Stats().Subscribed, "the refused subscription is not honoured")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_publisher_refused_subscriptions_total Subscriptions refused because their subscriber already held 256 distinct prefixes or 64 KiB of them.
# TYPE kvroute_publisher_refused_subscriptions_total counter
kvroute_publisher_refused_subscriptions_total 11
`), "kvroute_publisher_refused_subscriptions_total"))

	_, err = c.Write(append(msg(0, "t0000"), msg(1, "kv@")...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.HasSubscription("kv@") }, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(extra+1), p.Stats().Refused)
}

// TestOneCancelEndsARepeatedSubscription follows libzmq's XPUB, which keeps
// a set of prefixes per subscriber: a prefix subscribed twice is cancelled
// by one CANCEL. A libzmq SUB subscribed twice to a prefix sends both
// subscriptions but only the last unsubscription, and a go-zeromq SUB
// drops the prefix at its first unsubscription; counting repeats kept
// sending such a subscriber what it no longer reads.
func TestOneCancelEndsARepeatedSubscription(t *testing.T) {
	s := newPubSubscriber(nil, 1)
	require.True(t, s.subscribe([]byte("kv@"), true))
	require.True(t, s.subscribe([]byte("kv@"), true))
	require.True(t, s.subscribe([]byte("kv@"), false))
	require.False(t, s.matches([]byte("kv@a@m")), "one cancellation ends the subscription")
	require.Empty(t, *s.topics.Load())
	require.Zero(t, s.bytes)
}
