package stallwrite_test

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/stallwrite"
	"github.com/kvroute/kvroute/telemetry"
)

// slowClient is a ResponseWriter whose client takes each write in per of
// the clock's time.
type slowClient struct {
	*httptest.ResponseRecorder
	clk *telemetry.Manual
	per time.Duration
}

func (c slowClient) Write(p []byte) (int, error) {
	c.clk.Advance(c.per)
	return c.ResponseRecorder.Write(p)
}

// Under a floor of 1 MiB/s after 10 s, the writes of the first n bytes may
// wait 10 s plus n at 1 MiB/s in all: a client that takes each MiB in
// 3.5 s passes its first writes on the grace (before the fifth, 14 s
// waited against 14 s allowed), and the sixth (17.5 s against 15 s) is
// refused whole, as TooSlow and not Stalled. The time between writes, the
// handler's own, does not count.
func TestFloorCutsAClientBelowTheRate(t *testing.T) {
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := httptest.NewRecorder()
	sw := stallwrite.StartFloor(slowClient{rec, clk, 3500 * time.Millisecond}, time.Minute,
		stallwrite.Floor{Rate: 1 << 20, Grace: 10 * time.Second, Clock: clk})
	defer sw.Stop()
	mib := bytes.Repeat([]byte{'s'}, 1<<20)

	for i := range 5 { // waited 0, 3.5, 7, 10.5, 14 s before write i, allowed 10 s + i s
		_, err := sw.Write(mib)
		require.NoError(t, err, "write %d", i)
		clk.Advance(time.Hour) // the handler's time
	}
	n, err := sw.Write(mib) // waited 17.5 s for 5 MiB, allowed 15 s
	require.Zero(t, n)
	require.True(t, stallwrite.TooSlow(err), "%v", err)
	require.False(t, stallwrite.Stalled(err))
	require.Equal(t, 5<<20, rec.Body.Len(), "the refused write sent nothing")
}

// Without a floor (Start, or a zero Rate) a response may take any time.
func TestNoFloorWithoutRate(t *testing.T) {
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := httptest.NewRecorder()
	sw := stallwrite.StartFloor(rec, time.Minute, stallwrite.Floor{Grace: time.Second, Clock: clk})
	defer sw.Stop()
	for range 3 {
		clk.Advance(time.Hour)
		_, err := sw.Write([]byte("slow"))
		require.NoError(t, err)
	}
	require.Equal(t, "slowslowslow", rec.Body.String())
}
