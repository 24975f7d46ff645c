package gateway

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/session"
)

// StatusPath is the gateway's status page: plain HTML (no scripts) with the
// model and the effective configuration (credentials redacted), every
// endpoint's role, cache mode (precise, approximate or blind, with a
// warning while any is not precise), index source, KV-event stream state, last applied
// sequence, blocks indexed and in-flight load, a chart of the predicted
// against the engine-reported cached share of prompt tokens over the last
// 15 minutes, and the latest routing decisions with their request ID,
// model, match, filter outcome and cache mode. It refreshes itself every 2 s.
const StatusPath = "/debug/kvroute"

// RoleLabel is the endpoint label the status page reads an endpoint's role
// from (prefill, decode or both), as llm-d labels its model-server pods.
const RoleLabel = "llm-d.ai/role"

// statusEndpoint is one row of the status page's endpoint table.
type statusEndpoint struct {
	ID, Role, Source, State, LastApplied, SinceApplied string
	Mode                                               string // precise, approximate or blind (package approx)
	ApproxEntries                                      int
	Capacity                                           string // the approximate index's capacity and its source; "–" when not kept
	CapacityFallback                                   string // why it is not the engine's own, with the scrape failure
	AppliedSeq                                         string
	Blocks                                             int
	InflightTokens, InflightRequests                   int64
	Inaccurate, GivenUp                                bool
}

var statusTmpl = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>kvroute gateway</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#eee}
.live,.precise{color:#080}.degraded,.bad,.blind{color:#b00}.approximate{color:#a60}.warn{background:#fff3cd;padding:.4em}.connecting,.replaying{color:#a60}
.key{display:inline-block;width:16px;height:5px;vertical-align:middle;margin:0 .3em}
pre{background:#f6f6f6;padding:.6em;max-height:24em;overflow:auto}</style></head>
<body><h1>kvroute gateway</h1>
<p id="summary">ready: <b id="ready">{{.Ready}}</b>{{if .Reason}} — {{.Reason}}{{end}}; model: <b id="model">{{.Model}}</b>; policy: {{.Policy}}; cache modes: <b id="modes">{{.Modes}}</b>; {{len .Endpoints}} endpoint(s); index: {{.IndexBlocks}} blocks; generated {{.Now}}</p>
{{if .ModeWarning}}<p id="mode-warning" class="warn">{{.ModeWarning}}</p>{{end}}
{{if .CapacityWarning}}<p id="capacity-warning" class="warn">{{.CapacityWarning}}</p>{{end}}
<h2>Endpoints</h2>
<table id="endpoints"><tr><th>endpoint</th><th>role</th><th>cache mode</th><th>approximate capacity</th><th>index source</th><th>stream state</th><th>last applied seq</th><th>last applied</th><th>blocks indexed</th><th>in-flight tokens</th><th>in-flight requests</th><th>predictions</th></tr>
{{range .Endpoints}}<tr class="endpoint" data-id="{{.ID}}"><td>{{.ID}}</td><td class="role">{{.Role}}</td><td class="mode {{.Mode}}">{{.Mode}}{{if eq .Mode "approximate"}} ({{.ApproxEntries}} entries){{end}}</td><td class="capacity">{{.Capacity}}{{if .CapacityFallback}} <span class="bad capacity-fallback">fallback: {{.CapacityFallback}}</span>{{end}}</td><td class="source">{{.Source}}</td><td class="{{.State}}">{{.State}}{{if .GivenUp}} (given up){{end}}</td><td>{{.AppliedSeq}}</td><td>{{.SinceApplied}}</td><td>{{.Blocks}}</td><td>{{.InflightTokens}}</td><td>{{.InflightRequests}}</td><td>{{if .Inaccurate}}<span class="bad">missing persistently</span>{{else}}ok{{end}}</td></tr>
{{end}}</table>
<h2>Cached share of prompt tokens: predicted vs engine-reported</h2>
<p id="share-summary"><span class="key" style="background:#1f6fd1"></span>predicted <span class="key" style="background:#e07000"></span>engine-reported; per 10 s over the last 15 minutes. {{.ShareSummary}}</p>
{{.Chart}}
<h2>Latest decisions</h2>
<table id="decisions"><tr><th>time</th><th>request</th><th>model</th><th>api</th><th>endpoint</th><th>prompt tokens</th><th>predicted cached</th><th>engine cached</th><th>error</th><th>filter outcome</th><th>used cache</th><th>cache mode</th><th>result</th></tr>
{{range .Decisions}}<tr class="decision"><td>{{.Time.Format "15:04:05.000"}}</td><td class="request-id">{{.RequestID}}</td><td class="model">{{.Model}}{{if .LoRA}} (LoRA){{end}}</td><td>{{.API}}</td><td>{{.Endpoint}}</td><td>{{.PromptTokens}}</td><td>{{.PredictedCached}}</td><td>{{if ge .ActualCached 0}}{{.ActualCached}}{{else}}–{{end}}</td><td>{{if ge .ActualCached 0}}{{.Error}}{{end}}</td><td>{{.Outcome}}</td><td>{{.UsedCache}}</td><td class="mode {{.CacheMode}}">{{.CacheMode}}</td><td>{{.Result}}</td></tr>
{{end}}</table>
<h2>Effective configuration</h2>
<p>As the gateway runs it; a 0 or empty value takes its package's default. Credentials (passwords, tokens, secrets, the passwords in URLs) are shown as [redacted].</p>
<pre id="config">{{.Config}}</pre>
</body></html>
`))

// statusData is what the status page shows.
type statusData struct {
	Ready        bool
	Reason       string
	Now          string
	Model        string
	Policy       Policy
	IndexBlocks  int
	Endpoints    []statusEndpoint
	Decisions    []DecisionRecord
	Chart        template.HTML
	ShareSummary string
	Config       string
	Modes        string // "2 precise, 1 approximate, 0 blind"
	ModeWarning  string // set when an endpoint is not precise
	// CapacityWarning is set when an endpoint's approximate index is not
	// sized to its engine's own capacity.
	CapacityWarning string
}

// status renders StatusPath.
func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	samples := s.handler.history.samples()
	data := statusData{Now: now.UTC().Format(time.RFC3339), Model: s.cfg.Proxy.Model, Policy: s.cfg.Policy,
		Decisions: s.handler.Recent(), Chart: shareChart(samples, now), ShareSummary: shareSummary(samples),
		Config: configText(s.shownConfig())}
	if data.Model == "" {
		data.Model = "as each request names it"
	}
	eps := *s.handler.endpoints.Load()
	data.Reason = s.notReady()
	data.Ready = data.Reason == ""
	states := map[string]statusEndpoint{}
	if r := s.router; r != nil {
		data.IndexBlocks = r.Index().Stats().Blocks
		for _, e := range r.Readiness() {
			se := statusEndpoint{State: string(e.State), GivenUp: e.GivenUp, AppliedSeq: "–", SinceApplied: "never"}
			if e.Status.HasApplied {
				se.AppliedSeq = strconv.FormatUint(e.Status.Applied, 10)
			}
			if !e.LastApplied.IsZero() {
				se.SinceApplied = time.Since(e.LastApplied).Round(time.Millisecond).String() + " ago"
			}
			se.Source = eventSource(e, r)
			states[e.ID] = se
		}
	}
	modes := s.endpointModes()
	data.Modes, data.ModeWarning = modeSummary(modes)
	data.CapacityWarning = capacityWarning(modes)
	for _, e := range eps {
		se, ok := states[e.ID]
		if !ok {
			se = statusEndpoint{State: "no events", AppliedSeq: "–", SinceApplied: "never", Source: s.noEventsSource()}
		}
		se.ID = e.ID
		se.Role = e.Labels[RoleLabel]
		if se.Role == "" {
			se.Role = "–"
		}
		se.Capacity = "–"
		if s.approx != nil {
			m := modes[e.ID]
			se.Mode = m.Mode.String()
			se.ApproxEntries = m.Entries
			if s.approx.Enabled() {
				se.Capacity = capacityText(m)
				se.CapacityFallback = fallbackText(m)
			}
		}
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

// eventSource says where a subscribed endpoint's index entries come from:
// its KV-event stream (the engine's PUB socket, or the gateway's bound
// socket the engine connects to), its replay socket, and the speculative
// entries of the router's own decisions.
func eventSource(e kvroute.EndpointReadiness, r *kvroute.Router) string {
	var b strings.Builder
	b.WriteString("KV events")
	if addrs := r.Events().BindAddrs(); len(addrs) > 0 {
		fmt.Fprintf(&b, " (engine connects to %s)", strings.Join(addrs, ", "))
	}
	fmt.Fprintf(&b, ", %d messages applied", e.Status.Messages)
	if e.Status.Replay != "" {
		b.WriteString("; replay " + e.Status.Replay)
	} else {
		b.WriteString("; no replay")
	}
	if e.Status.Snapshot != "" {
		b.WriteString("; engine snapshot " + e.Status.Snapshot)
	}
	if src := e.Status.IndexSource; src != "" {
		b.WriteString("; rebuilt from " + indexSourceNames[src])
	}
	if e.Status.Degraded {
		b.WriteString("; degraded: may hold stale blocks")
	}
	b.WriteString("; + speculative")
	return b.String()
}

// indexSourceNames spells out kvevents' EndpointStatus.IndexSource values.
var indexSourceNames = map[string]string{
	"engine_snapshot": "the engine's snapshot",
	"replay":          "the replay window",
	"recorded":        "a checkpoint or peer, verified by replay",
	"live":            "the live stream",
}

// noEventsSource says where the index entries of an endpoint without a
// KV-event stream come from.
func (s *Server) noEventsSource() string {
	switch {
	case s.router == nil:
		return "none (" + string(s.cfg.Policy) + " routing keeps no index)"
	case s.router.Events() == nil:
		return "speculative only (KV events off)"
	default:
		return "speculative only (not subscribed: events.selector)"
	}
}

// shareSummary is a sentence on the latest bucket of the share history.
func shareSummary(samples []shareSample) string {
	if len(samples) == 0 {
		return "No observed requests yet: the chart needs the gateway's observeCachedTokens and engines that report cached tokens in their usage."
	}
	l := samples[len(samples)-1]
	return fmt.Sprintf("Latest (%s): predicted %.0f%%, engine-reported %.0f%% of %d prompt tokens over %d request(s).",
		l.Start.UTC().Format("15:04:05"), 100*l.PredictedShare(), 100*l.ActualShare(), l.Prompt, l.Requests)
}

// shownDisagg is the disagg section as the gateway's --config file writes
// it: the profile's keys beside mode and exchange (DisaggHostConfig).
type shownDisagg struct {
	disagg.Config
	Mode     string         `json:"mode"`
	Exchange sidecar.Config `json:"exchange"`
}

// shownConfig is the configuration the status page shows: the server's,
// every section of it, with the keys the gateway's --config file uses
// where it has them; the endpoints are in their own table.
func (s *Server) shownConfig() any {
	var dis *shownDisagg
	if s.cfg.Disagg != nil {
		dis = &shownDisagg{Config: *s.cfg.Disagg, Mode: s.cfg.DisaggHost.Mode, Exchange: s.cfg.DisaggHost.Exchange}
	}
	return struct {
		Listen              string                `json:"listen"`
		Policy              Policy                `json:"policy"`
		ReadHeaderTimeout   time.Duration         `json:"readHeaderTimeout"`
		IdleTimeout         time.Duration         `json:"idleTimeout"`
		Proxy               Config                `json:"proxy"`
		Admission           *admission.Config     `json:"admission"`
		EngineMetrics       *enginemetrics.Config `json:"engineMetrics"`
		LoRA                *lora.Config          `json:"lora"`
		Approximate         *approx.Config        `json:"approximate"`
		Disagg              *shownDisagg          `json:"disagg"`
		Session             *session.Config       `json:"session"`
		Models              *models.Config        `json:"models"`
		PeerLoadFromMetrics bool                  `json:"peerLoadFromMetrics"`
		Router              kvroute.Config        `json:"router"`
	}{s.cfg.Listen, s.cfg.Policy, s.cfg.ReadHeaderTimeout, s.cfg.IdleTimeout, s.cfg.Proxy, s.cfg.Admission,
		s.cfg.EngineMetrics, s.cfg.LoRA, s.cfg.Approximate, dis, s.cfg.Session, s.cfg.Models, s.cfg.PeerLoadFromMetrics,
		s.cfg.Router}
}

// endpointModes returns every endpoint's cache mode by ID (empty under
// PolicyRoundRobin).
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

// modeSummary counts the endpoints by mode and, when any is not precise,
// says so: a benchmark of precise routing must not run on approximate or
// blind endpoints unnoticed.
func modeSummary(modes map[string]approx.EndpointState) (summary, warning string) {
	var n [3]int
	for _, e := range modes {
		n[e.Mode]++
	}
	summary = fmt.Sprintf("%d precise, %d approximate, %d blind", n[approx.ModePrecise], n[approx.ModeApproximate], n[approx.ModeBlind])
	if len(modes) > 0 && n[approx.ModePrecise] < len(modes) {
		warning = fmt.Sprintf("Not every endpoint is routed precisely: %d approximate (KV events not live; cache state guessed from this router's own decisions), %d blind (KV events not live, no approximate index). Results measured now are not precise prefix-cache routing.",
			n[approx.ModeApproximate], n[approx.ModeBlind])
	}
	return summary, warning
}

// capacityText is an endpoint's approximate-index capacity as the status
// page shows it: "2000 blocks (engine: 8000 GPU, 0 CPU-offload blocks of
// 16 tokens)".
func capacityText(e approx.EndpointState) string {
	c := e.EngineCapacity
	bs := c.BlockSize
	if bs <= 0 {
		bs = approx.DefaultEngineBlockSize
	}
	return fmt.Sprintf("%d blocks (%s: %d GPU, %d CPU-offload blocks of %d tokens)", e.Capacity, e.CapacitySource, c.GPUBlocks, c.CPUBlocks, bs)
}

// fallbackText says why an endpoint's capacity is not its engine's own,
// with the scrape's failure when there is one; empty when it is.
func fallbackText(e approx.EndpointState) string {
	if e.CapacityFallback == "" {
		return ""
	}
	if e.MetricsFailure != "" {
		return e.CapacityFallback + " (last scrape: " + e.MetricsFailure + ")"
	}
	return e.CapacityFallback
}

// capacityWarning names the endpoints whose approximate index is not sized
// to their engine's own capacity, or "" when there are none.
func capacityWarning(modes map[string]approx.EndpointState) string {
	var ids []string
	for id, e := range modes {
		if e.CapacityFallback != "" {
			ids = append(ids, id+": "+fallbackText(e))
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	return fmt.Sprintf("%d endpoint(s) have an approximate index not sized to their engine's own capacity (kvroute_approx_capacity_fallbacks_total): %s. Their configured or default capacity applies.",
		len(ids), strings.Join(ids, "; "))
}
