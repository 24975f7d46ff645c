package enginemetrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

// errScrapeTimeout is the cause a scrape's context is cancelled with when
// Config.Timeout passes on the Scraper's clock.
var errScrapeTimeout = errors.New("scrape timed out")

// acceptHeader asks for the Prometheus text format, the one parsed here.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// scrape fetches and parses one endpoint's metrics and records the outcome.
// A scrape cut short by Close records nothing.
func (s *Scraper) scrape(t *target) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	timer := s.clk.AfterFunc(s.cfg.Timeout, func() { cancel(errScrapeTimeout) })
	defer timer.Stop()
	sig, drops, ferr := s.fetch(ctx, t)
	if s.ctx.Err() != nil {
		return // closing
	}
	// The scrape is counted once its outcome is visible: whoever sees the
	// count reads the signal it produced (a count ahead of it let a reader
	// find the previous, by then stale, signal).
	now := s.clk.Now()
	if ferr != nil {
		if prev := t.last.Load(); prev == nil || prev.reason != ferr.reason {
			s.set.Log().Warn("engine metrics: scrape failed; the endpoint's signal is unknown until one succeeds",
				"endpoint", t.ep.ID, "url", t.url, "reason", ferr.reason, "err", ferr.err)
		}
		t.last.Store(&outcome{sig: Signal{Scraped: now}, reason: ferr.reason})
		t.m.failures[ferr.reason].Inc()
		t.m.scrapes.Inc()
		return
	}
	if prev := t.last.Load(); prev != nil && prev.reason != "" {
		s.set.Log().Info("engine metrics: scrapes succeed again", "endpoint", t.ep.ID)
	}
	for i, n := range drops {
		if n > 0 {
			t.m.loraDrops[i].Add(float64(n))
		}
	}
	sig.Scraped = now
	t.good.Store(&sig)
	t.last.Store(&outcome{sig: sig})
	t.m.scrapes.Inc()
}

// fetch fetches the body (fetchBody) and parses it.
func (s *Scraper) fetch(ctx context.Context, t *target) (Signal, loraDrops, *scrapeError) {
	body, err := s.fetchBody(ctx, t)
	if err != nil {
		return Signal{}, loraDrops{}, err
	}
	return parse(body, t.ep.Rank)
}

// fetchBody sends the request and reads at most Config.MaxBodyBytes of the
// body.
func (s *Scraper) fetchBody(ctx context.Context, t *target) ([]byte, *scrapeError) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, failure(reasonConnection, "%v", err)
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, transportFailure(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, failure(reasonStatus, "status %d", resp.StatusCode)
	}
	limit := s.cfg.MaxBodyBytes
	if resp.ContentLength > limit {
		return nil, failure(reasonTooLarge, "body of %d bytes exceeds %d", resp.ContentLength, limit)
	}
	body, err := io.ReadAll(bytebudget.LimitPastCap(resp.Body, limit))
	if err != nil {
		return nil, transportFailure(ctx, err)
	}
	if int64(len(body)) > limit {
		return nil, failure(reasonTooLarge, "body exceeds %d bytes", limit)
	}
	return body, nil
}

// transportFailure classifies a failed request or body read: the scrape's
// own timeout, or a connection failure.
func transportFailure(ctx context.Context, err error) *scrapeError {
	var ne net.Error
	if context.Cause(ctx) == errScrapeTimeout || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return failure(reasonTimeout, "%v", errScrapeTimeout)
	}
	return failure(reasonConnection, "%v", err)
}
