package extproc

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/approx"
)

// Paths of the picker's HTTP status handler (StatusHandler), the same as
// the kvroute gateway's.
const (
	// StatusPath is the status page: plain HTML, refreshed every 2 s, with
	// the readiness and its reason, every endpoint's KV-event stream state,
	// last applied sequence, blocks indexed and in-flight load, and the
	// latest ext_proc streams with the endpoints named to Envoy (the pick
	// and its fallbacks), the one Envoy reported as having served, the
	// prediction and the result.
	StatusPath = "/debug/kvroute"
	// ReadyPath answers 200 when the picker is ready (the readiness the
	// gRPC health service reports, and the router's index has caught up)
	// and 503 with the reason otherwise, as JSON, for probes and operators
	// that speak HTTP.
	ReadyPath = "/ready"
)

// shuttingDownReason is ReadyPath's reason once Shutdown has run: the
// picker drains its streams and takes no new ones, whatever its index says.
const shuttingDownReason = "shutting down"

// StatusHandler serves ReadyPath and StatusPath for the picker and router,
// the *kvroute.Router it routes with (the same as the picker's Picker), for
// the picker's HTTP (metrics) port. Both answer GET and HEAD; any other
// method is answered 405 with Allow: GET, HEAD, as the kvroute gateway
// answers it on the same paths.
func (s *Server) StatusHandler(router *kvroute.Router) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, _ *http.Request) { s.serveReady(w, router) })
	m.HandleFunc("GET "+StatusPath, func(w http.ResponseWriter, _ *http.Request) { s.serveStatus(w, router) })
	return m
}

// readiness returns whether the picker is ready and, when not, why: it
// is shutting down (Shutdown has run, so the gRPC server drains), it has
// no endpoints, the router's index has not caught up, the source
// FollowReadiness follows gave a reason of its own (a kvroute-epp replica
// standing by for its leader's Lease), or it has not been told it is ready
// (endpoint discovery has not synced, or it shut down).
func (s *Server) readiness(router *kvroute.Router) (bool, string) {
	if s.down.Load() {
		return false, shuttingDownReason
	}
	if reason := s.notReady(router); reason != "" {
		// Without endpoints the followed source's latest reason, when it
		// has one, says why (endpoint discovery's).
		if r := s.reason.Load(); strings.HasPrefix(reason, noEndpoints) && r != nil && strings.HasPrefix(*r, noEndpoints+": ") {
			return false, *r
		}
		return false, reason
	}
	if !s.ready.Load() {
		if r := s.reason.Load(); r != nil && *r != "" {
			return false, *r
		}
		return false, "not ready yet (endpoint discovery has not synced)"
	}
	return true, ""
}

func (s *Server) serveReady(w http.ResponseWriter, router *kvroute.Router) {
	type endpoint struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		GivenUp bool   `json:"givenUp,omitempty"`
		Mode    string `json:"mode,omitempty"` // with Options.Approximate
	}
	body := struct {
		Ready       bool       `json:"ready"`
		Reason      string     `json:"reason,omitempty"`
		Endpoints   []endpoint `json:"endpoints,omitempty"`
		CacheModes  string     `json:"cacheModes,omitempty"`
		ModeWarning string     `json:"modeWarning,omitempty"`
	}{}
	body.Ready, body.Reason = s.readiness(router)
	modes := s.endpointModes()
	for _, e := range router.Readiness() {
		body.Endpoints = append(body.Endpoints, endpoint{ID: e.ID, State: string(e.State), GivenUp: e.GivenUp, Mode: modeOf(modes, e.ID)})
	}
	if len(modes) > 0 {
		body.CacheModes, body.ModeWarning = modeSummary(modes)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// statusEndpoint is one row of the status page's endpoint table.
type statusEndpoint struct {
	ID, State, AppliedSeq, SinceApplied string
	Mode                                string // precise, approximate, blind; "–" without Options.Approximate
	Blocks                              int
	InflightTokens, InflightRequests    int64
	Inaccurate, GivenUp                 bool
}

var statusTmpl = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>kvroute endpoint picker</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#eee}
.live,.precise{color:#080}.degraded,.bad,.blind{color:#b00}.connecting,.replaying,.approximate{color:#a60}.warn{background:#fff3cd;padding:.4em}</style></head>
<body><h1>kvroute endpoint picker</h1>
<p id="summary">ready: <b id="ready">{{.Ready}}</b>{{if .Reason}} — {{.Reason}}{{end}}; {{len .Endpoints}} endpoint(s); index: {{.IndexBlocks}} blocks; fallbacks named: {{.Fallbacks}}; cache modes: <b id="modes">{{.Modes}}</b>; generated {{.Now}}</p>
{{if .ModeWarning}}<p id="mode-warning" class="warn">{{.ModeWarning}}</p>{{end}}
<h2>Endpoints</h2>
<table id="endpoints"><tr><th>endpoint</th><th>cache mode</th><th>stream state</th><th>last applied seq</th><th>last applied</th><th>blocks indexed</th><th>in-flight tokens</th><th>in-flight requests</th><th>predictions</th></tr>
{{range .Endpoints}}<tr class="endpoint" data-id="{{.ID}}"><td>{{.ID}}</td><td class="mode {{.Mode}}">{{.Mode}}</td><td class="{{.State}}">{{.State}}{{if .GivenUp}} (given up){{end}}</td><td>{{.AppliedSeq}}</td><td>{{.SinceApplied}}</td><td>{{.Blocks}}</td><td>{{.InflightTokens}}</td><td>{{.InflightRequests}}</td><td>{{if .Inaccurate}}<span class="bad">missing persistently</span>{{else}}ok{{end}}</td></tr>
{{end}}</table>
<h2>Latest requests</h2>
<table id="requests"><tr><th>time</th><th>request</th><th>path</th><th>model</th><th>endpoints named</th><th>served by</th><th>prompt tokens</th><th>predicted cached</th><th>engine cached</th><th>used cache</th><th>cache mode</th><th>filter outcome</th><th>result</th></tr>
{{range .Streams}}<tr class="request"><td>{{.Time.Format "15:04:05.000"}}</td><td>{{.RequestID}}</td><td>{{.Path}}</td><td>{{.Model}}</td><td>{{.Endpoints}}</td><td>{{if .Served}}{{.Served}}{{else}}–{{end}}</td><td>{{.PromptTokens}}</td><td>{{.PredictedCached}}</td><td class="actual">{{if .Observed}}{{.ActualCached}}{{else}}–{{end}}</td><td>{{.UsedCache}}</td><td class="mode {{.CacheMode}}">{{.CacheMode}}</td><td>{{.Outcome}}</td><td>{{.Result}}</td></tr>
{{end}}</table>
</body></html>
`))

func (s *Server) serveStatus(w http.ResponseWriter, router *kvroute.Router) {
	now := s.clock.Now()
	data := struct {
		Ready       bool
		Reason      string
		Now         string
		IndexBlocks int
		Fallbacks   int
		Endpoints   []statusEndpoint
		Streams     []streamRecord
		Modes       string
		ModeWarning string
	}{Now: now.UTC().Format(time.RFC3339), IndexBlocks: router.Index().Stats().Blocks, Fallbacks: s.cfg.Fallbacks, Streams: s.recent.List()}
	data.Ready, data.Reason = s.readiness(router)
	states := map[string]statusEndpoint{}
	for _, e := range router.Readiness() {
		se := statusEndpoint{State: string(e.State), GivenUp: e.GivenUp, AppliedSeq: "–", SinceApplied: "never"}
		if e.Status.HasApplied {
			se.AppliedSeq = strconv.FormatUint(e.Status.Applied, 10)
		}
		if !e.LastApplied.IsZero() {
			se.SinceApplied = now.Sub(e.LastApplied).Round(time.Millisecond).String() + " ago"
		}
		states[e.ID] = se
	}
	modes := s.endpointModes()
	data.Modes, data.ModeWarning = modeSummary(modes)
	for _, e := range *s.endpoints.Load() {
		se, ok := states[e.ID]
		if !ok {
			se = statusEndpoint{State: "no events", AppliedSeq: "–", SinceApplied: "never"}
		}
		se.ID, se.Mode = e.ID, "–"
		if m, ok := modes[e.ID]; ok {
			se.Mode = m.Mode.String()
		}
		se.Blocks = router.Index().EndpointBlocks(e.ID)
		se.InflightTokens, se.InflightRequests, _ = router.Load().Load(e.ID)
		se.Inaccurate = router.EndpointInaccurate(e.ID)
		data.Endpoints = append(data.Endpoints, se)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTmpl.Execute(w, data); err != nil {
		s.log.Warn("extproc: status page", "err", err)
	}
}

// endpointModes returns every endpoint's cache mode by ID, from
// Options.Approximate; empty without it.
func (s *Server) endpointModes() map[string]approx.EndpointState {
	out := map[string]approx.EndpointState{}
	if s.approx == nil {
		return out
	}
	for _, e := range s.approx.Endpoints() {
		out[e.ID] = e
	}
	return out
}

func modeOf(modes map[string]approx.EndpointState, id string) string {
	if m, ok := modes[id]; ok {
		return m.Mode.String()
	}
	return ""
}

// modeSummary counts the endpoints by mode and warns when one is not
// precise, so that nobody measures approximate or blind routing believing
// it precise.
func modeSummary(modes map[string]approx.EndpointState) (summary, warning string) {
	if len(modes) == 0 {
		return "unknown (no approximate index given to the picker)", ""
	}
	var n [3]int
	for _, e := range modes {
		n[e.Mode]++
	}
	summary = fmt.Sprintf("%d precise, %d approximate, %d blind", n[approx.ModePrecise], n[approx.ModeApproximate], n[approx.ModeBlind])
	if n[approx.ModePrecise] < len(modes) {
		warning = fmt.Sprintf("Not every endpoint is routed precisely: %d approximate (KV events not live; cache state guessed from the router's own decisions), %d blind (KV events not live, no approximate index). Results measured now are not precise prefix-cache routing.",
			n[approx.ModeApproximate], n[approx.ModeBlind])
	}
	return summary, warning
}
