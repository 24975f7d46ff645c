package enginemetrics

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
)

// The largest maxBodyBytes the configuration accepts bounds the body like
// any other: a page within it is read whole (one byte more than the limit
// is read to tell a page that exceeds it, and that count must not wrap
// around to a negative one, which would read nothing and fail every
// scrape as missing_metric).
func TestLargestMaxBodyBytesReadsThePage(t *testing.T) {
	srv := serve(t, page(metricsPage(4, 2, 0.5)))
	cfg := manualConfig()
	cfg.MaxBodyBytes = math.MaxInt64
	s, _, _ := newScraper(t, cfg)
	ep := endpointOf(srv)
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	failure, completed := s.LastScrape(ep)
	require.True(t, completed)
	require.Empty(t, failure)
	sig, ok := s.Signal(ep)
	require.True(t, ok)
	require.Equal(t, 4, sig.Waiting)
	require.Equal(t, 2, sig.Running)
}
