package extproc

import (
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/recent"
)

// streamRecord is one ext_proc stream as the status page lists it.
type streamRecord struct {
	Time            time.Time
	RequestID       string
	Path            string
	Model           string
	Endpoints       string // the pick and its fallbacks, as sent to Envoy
	Served          string // the endpoint Envoy reported; "" when it reported none
	PromptTokens    int
	PredictedCached int
	ActualCached    int  // the cached tokens the engine reported (Config.ObserveCachedTokens)
	Observed        bool // ActualCached was read from the response's usage
	UsedCache       bool
	CacheMode       string // precise, approximate or blind
	Outcome         string
	Result          string
}

// clipRecord bounds rec's texts from the request and from Envoy (request
// ID, path, model, served endpoint) to recent.MaxText bytes before the
// status page keeps it; it reports whether it cut any. The path and the
// served endpoint are parts of a longer header or metadata value, so they
// are copied even when short, keeping none of that value's memory.
func clipRecord(rec *streamRecord) bool {
	var c [4]bool
	rec.RequestID, c[0] = recent.Clip(rec.RequestID)
	rec.Model, c[1] = recent.Clip(rec.Model)
	if rec.Path, c[2] = recent.Clip(rec.Path); !c[2] {
		rec.Path = strings.Clone(rec.Path)
	}
	if rec.Served, c[3] = recent.Clip(rec.Served); !c[3] {
		rec.Served = strings.Clone(rec.Served)
	}
	return c != [4]bool{}
}
