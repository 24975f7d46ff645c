package extproc

import (
	"time"
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
	UsedCache       bool
	CacheMode       string // precise, approximate or blind
	Outcome         string
	Result          string
}
