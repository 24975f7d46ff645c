package llmd

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kvroute/kvroute/session"
)

// The llm-d plugin types of session affinity kvroute translates into a
// session.Config.
const (
	sessionScorer = "session-affinity-scorer"
	sessionFilter = "session-affinity-filter"
)

// llm-d's session affinity strategies.
const (
	strategyEndpointHeader = "encoded_endpoint_header"
	strategySessionID      = "session_id"
)

// llm-d's defaults for session affinity.
const (
	llmdSessionTokenHeader = "x-session-token" // encoded_endpoint_header's header
	llmdSessionIDHeader    = "x-session-id"    // session_id's source
	llmdSessionTTL         = 300 * time.Second // session_id's evictionTtlSeconds
)

// sessionParams are the parameters of llm-d's session-affinity-scorer and
// session-affinity-filter.
type sessionParams struct {
	// Strategy is encoded_endpoint_header (or empty) or session_id.
	Strategy string `json:"strategy"`
	// ProfileName names the scheduling profile whose pick the instance
	// pins; empty is the primary (decode) pick, the one kvroute pins.
	ProfileName string `json:"profileName"`
	// EncodedEndpointHeaderConfig is encoded_endpoint_header's.
	EncodedEndpointHeaderConfig struct {
		Header string `json:"header"`
	} `json:"encodedEndpointHeaderConfig"`
	// SessionIDConfig is session_id's.
	SessionIDConfig struct {
		Sources              []sessionSource `json:"sources"`
		EvictionTTLSeconds   float64         `json:"evictionTtlSeconds"`
		EvictionSweepSeconds json.RawMessage `json:"evictionSweepSeconds" finding:"unneeded:kvroute sweeps no store: an entry past its ttl goes when looked up, or when a new session needs room"`
	} `json:"sessionIdConfig"`
}

// sessionSource is one of session_id's sources.
// Exactly one of Header and Attribute is set, as llm-d requires.
type sessionSource struct {
	// Header is a request header, one of session's headers.
	Header string `json:"header"`
	// Attribute is a request attribute another plugin publishes;
	// kvroute reads a session-id-producer's (sessionIDAttribute).
	Attribute string `json:"attribute"`
	// Producer names the plugin that publishes Attribute.
	Producer string `json:"producer"`
}

// Notes of the session translation.
const (
	noteSession       = "kvroute's session affinity is package session (kvroute-epp --session-config): an EndpointPickerConfig turns it on with a session-affinity-scorer or session-affinity-filter"
	noteSessionScorer = "llm-d's scorer gives the session's endpoint a flat 1; kvroute's gives its headroom below saturationTokens (1 - load/saturationTokens), so a session leaves a saturated endpoint"
	noteSessionFilter = "llm-d's filter pins a session to its endpoint; kvroute's session scorer only prefers it, weighed against its load (session's weight and saturationTokens), so a session leaves a saturated endpoint"
	noteSessionPD     = "under kvroute's P/D profile the session scorer enters the decode pick (disagg's DecodeScorers, which kvroute-epp and the gateway set), added to the decode score (the cached share and the decode load) rather than to llm-d's decode-profile scorers"
	noteEndpointToken = "llm-d's token names the endpoint (base64 of namespace/name) and is written back in this response header; kvroute reads the header's value as an opaque session key, remembered for session's ttl, and writes back its llm-d-session cookie naming the endpoint instead (session's cookie and setCookie)"
)

// translateSession turns the first session affinity plugin of staged that
// a scheduling profile kvroute runs references (prof, or under P/D the
// prefill profile too) and that pins the request's own pick (the decode
// pick under P/D, whose profile is decodeProfile) into st.session, with the headers and cookie of the
// session-id-producers its session_id sources read; the scorer's weight is
// its weight in prof (a finding when pdProfiles' prefill profile weighs it
// otherwise). It returns the findings.
func translateSession(staged []stagePlugin, profiles []schedulingProfile, prof schedulingProfile, pdProfiles []string, st *stages) ([]Finding, error) {
	decodeProfile := ""
	if len(pdProfiles) == 2 {
		decodeProfile = pdProfiles[1]
	}
	producers, err := sessionIDProducers(staged)
	if err != nil {
		return nil, err
	}
	var out []Finding
	first := ""
	read := map[string]bool{} // the producers st.session reads
	for _, p := range staged {
		if p.typ != sessionScorer && p.typ != sessionFilter {
			continue
		}
		var sp sessionParams
		at := p.path + ".parameters"
		if err := decodeStrict(p.params, &sp, at); err != nil {
			return nil, err
		}
		out = append(out, untranslated(&sp, at)...)
		// kvroute runs prof (the first profile, or a P/D handler's decode
		// profile) and, under P/D, the prefill profile.
		// A scorer's weight is its weight in prof (absent: llm-d's 1); a
		// filter has none.
		var weight *float64
		weightAt := "schedulingProfiles[" + prof.Name + "].plugins[" + p.name + "].weight"
		if ref := profileRef(p.name, prof); ref != nil && p.typ == sessionScorer {
			weight = ref.Weight
		}
		runs := profileRef(p.name, prof) != nil || slices.ContainsFunc(profiles, func(q schedulingProfile) bool {
			return len(pdProfiles) == 2 && q.Name == pdProfiles[0] && profileRef(p.name, q) != nil
		})
		switch {
		case !slices.ContainsFunc(profiles, func(prof schedulingProfile) bool { return profileRef(p.name, prof) != nil }):
			out = append(out, Finding{Path: p.path, Kind: NotNeeded, Note: "no scheduling profile references it, so llm-d scores and filters nothing by it; kvroute configures no session affinity for it"})
			continue
		case !runs:
			out = append(out, Finding{Path: p.path, Kind: NoEquivalent, Note: "only a scheduling profile kvroute does not run references it, so kvroute configures no session affinity for it; " + noteProfiles})
			continue
		case sp.ProfileName != "" && sp.ProfileName != decodeProfile:
			out = append(out, Finding{Path: join(at, "profileName"), Kind: NoEquivalent,
				Note: fmt.Sprintf("kvroute's session remembers the endpoint each request was routed to (under P/D its decode endpoint), not profile %q's pick", sp.ProfileName)})
			continue
		case weight != nil && *weight == 0:
			out = append(out, Finding{Path: weightAt, Kind: NotNeeded,
				Note: "a zero weight mutes the scorer in this profile in llm-d; kvroute configures no session affinity for it"})
			continue
		case weight != nil && *weight < 0:
			out = append(out, Finding{Path: weightAt, Kind: NoEquivalent,
				Note: "a negative weight steers a session away from its endpoint in this profile in llm-d; kvroute's session weight is not negative, so it configures no session affinity for it"})
			continue
		case first != "":
			out = append(out, Finding{Path: p.path, Kind: Different, Note: "kvroute keeps one session store, configured by plugins[" + first + "]"})
			continue
		}
		cfg := session.Config{}
		switch sp.Strategy {
		case "", strategyEndpointHeader:
			h := sp.EncodedEndpointHeaderConfig.Header
			if h == "" {
				h = llmdSessionTokenHeader
			}
			cfg.Headers = []string{h}
			out = append(out, Finding{Path: join(at, "strategy"), Kind: Different, Note: noteEndpointToken})
		case strategySessionID:
			ic := sp.SessionIDConfig
			srcs, err := sessionSources(ic.Sources, at+".sessionIdConfig.sources", producers)
			if err != nil {
				return nil, err
			}
			out = append(out, srcs.findings...)
			cfg.Headers, cfg.Cookie = srcs.headers, srcs.cookie
			if len(ic.Sources) == 0 {
				cfg.Headers = []string{llmdSessionIDHeader}
			}
			if len(cfg.Headers) == 0 {
				out = append(out, Finding{Path: at + ".sessionIdConfig.sources", Kind: NoEquivalent, Note: "no header source: kvroute reads its default session headers (x-session-id, x-dynamo-session-id, x-smg-routing-key)"})
			}
			if cfg.Cookie == "" {
				cfg.Cookie = "-" // no cookie source: session_id reads none
			} else {
				off := false
				cfg.SetCookie = &off // session_id writes nothing back
			}
			for name := range srcs.read {
				read[name] = true
			}
			switch ttl := ic.EvictionTTLSeconds; {
			case ttl == 0:
				cfg.TTL = llmdSessionTTL
			case ttl < 0 || math.IsNaN(ttl) || ttl > float64(math.MaxInt64/int64(time.Second)):
				return nil, invalid(fmt.Errorf("%s.sessionIdConfig.evictionTtlSeconds %v is not a positive number of seconds", at, ttl))
			default:
				cfg.TTL = time.Duration(ttl * float64(time.Second))
			}
		default:
			return nil, invalid(fmt.Errorf("%s.strategy %q is neither %s nor %s", at, sp.Strategy, strategyEndpointHeader, strategySessionID))
		}
		note := noteSessionScorer
		if p.typ == sessionFilter {
			note = noteSessionFilter
		}
		out = append(out, Finding{Path: p.path, Kind: Different, Note: note})
		if st.disagg != nil {
			out = append(out, Finding{Path: p.path, Kind: Different, Note: noteSessionPD})
		}
		if f, ok := prefillWeight(p.name, profiles, pdProfiles, "kvroute's session scorer enters the decode pick only, with weight"); ok && p.typ == sessionScorer {
			out = append(out, f)
		}
		if weight != nil {
			cfg.Weight = *weight
		}
		first = p.name
		st.session, st.sessionAt = &cfg, p.path
	}
	return append(out, unreadProducers(staged, read)...), nil
}
