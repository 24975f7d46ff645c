package gateway

import (
	"html/template"
	"net/http"
	"strconv"
	"time"
)

// StatusPath is the gateway's status page: plain HTML (no scripts) with
// every endpoint's KV-event stream state, last applied sequence, blocks
// indexed and in-flight load, and the latest routing decisions with their
// match and filter outcome. It refreshes itself every 2 s.
const StatusPath = "/debug/kvroute"

// statusEndpoint is one row of the status page's endpoint table.
type statusEndpoint struct {
	ID, State, LastApplied, SinceApplied string
	AppliedSeq                           string
	Blocks                               int
	InflightTokens, InflightRequests     int64
	Inaccurate, GivenUp                  bool
}

var statusTmpl = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>kvroute gateway</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#eee}
.live{color:#080}.degraded,.bad{color:#b00}.connecting,.replaying{color:#a60}</style></head>
<body><h1>kvroute gateway</h1>
<p id="summary">ready: <b id="ready">{{.Ready}}</b>{{if .Reason}} — {{.Reason}}{{end}}; {{len .Endpoints}} endpoint(s); index: {{.IndexBlocks}} blocks; generated {{.Now}}</p>
<h2>Endpoints</h2>
<table id="endpoints"><tr><th>endpoint</th><th>stream state</th><th>last applied seq</th><th>last applied</th><th>blocks indexed</th><th>in-flight tokens</th><th>in-flight requests</th><th>predictions</th></tr>
{{range .Endpoints}}<tr class="endpoint" data-id="{{.ID}}"><td>{{.ID}}</td><td class="{{.State}}">{{.State}}{{if .GivenUp}} (given up){{end}}</td><td>{{.AppliedSeq}}</td><td>{{.SinceApplied}}</td><td>{{.Blocks}}</td><td>{{.InflightTokens}}</td><td>{{.InflightRequests}}</td><td>{{if .Inaccurate}}<span class="bad">missing persistently</span>{{else}}ok{{end}}</td></tr>
{{end}}</table>
<h2>Latest decisions</h2>
<table id="decisions"><tr><th>time</th><th>request</th><th>api</th><th>endpoint</th><th>prompt tokens</th><th>predicted cached</th><th>engine cached</th><th>error</th><th>filter outcome</th><th>used cache</th><th>result</th></tr>
{{range .Decisions}}<tr class="decision"><td>{{.Time.Format "15:04:05.000"}}</td><td>{{.RequestID}}</td><td>{{.API}}</td><td>{{.Endpoint}}</td><td>{{.PromptTokens}}</td><td>{{.PredictedCached}}</td><td>{{if ge .ActualCached 0}}{{.ActualCached}}{{else}}–{{end}}</td><td>{{if ge .ActualCached 0}}{{.Error}}{{end}}</td><td>{{.Outcome}}</td><td>{{.UsedCache}}</td><td>{{.Result}}</td></tr>
{{end}}</table>
</body></html>
`))

// status renders StatusPath.
func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	data := struct {
		Ready       bool
		Reason      string
		Now         string
		IndexBlocks int
		Endpoints   []statusEndpoint
		Decisions   []DecisionRecord
	}{Ready: true, Now: time.Now().UTC().Format(time.RFC3339), Decisions: s.handler.Recent()}
	eps := *s.handler.endpoints.Load()
	if len(eps) == 0 {
		data.Ready, data.Reason = false, "no endpoints"
	}
	states := map[string]statusEndpoint{}
	if r := s.router; r != nil {
		data.IndexBlocks = r.Index().Stats().Blocks
		if reason := r.NotReady(); reason != "" {
			data.Ready, data.Reason = false, reason
		}
		for _, e := range r.Readiness() {
			se := statusEndpoint{State: string(e.State), GivenUp: e.GivenUp, AppliedSeq: "–", SinceApplied: "never"}
			if e.Status.HasApplied {
				se.AppliedSeq = strconv.FormatUint(e.Status.Applied, 10)
			}
			if !e.LastApplied.IsZero() {
				se.SinceApplied = time.Since(e.LastApplied).Round(time.Millisecond).String() + " ago"
			}
			states[e.ID] = se
		}
	}
	for _, e := range eps {
		se, ok := states[e.ID]
		if !ok {
			se = statusEndpoint{State: "no events", AppliedSeq: "–", SinceApplied: "never"}
		}
		se.ID = e.ID
		if r := s.router; r != nil {
			se.Blocks = r.Index().EndpointBlocks(e.ID)
			se.InflightTokens, se.InflightRequests, _ = r.Load().Load(e.ID)
			se.Inaccurate = r.EndpointInaccurate(e.ID)
		}
		data.Endpoints = append(data.Endpoints, se)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTmpl.Execute(w, data); err != nil {
		s.log.Warn("status page", "err", err)
	}
}
