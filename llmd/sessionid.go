package llmd

import (
	"fmt"
	"strings"
)

// llm-d's session-id-producer reads a session key from one request header
// or one cookie and publishes it as the request attribute
// SessionIDDataKey under its own name, which a session_id source reads as
// {attribute: SessionIDDataKey, producer: <its name>}.
const (
	sessionIDProducer  = "session-id-producer"
	sessionIDAttribute = "SessionIDDataKey"
)

// sessionIDParams are the parameters of llm-d's session-id-producer:
// exactly one of them is set.
type sessionIDParams struct {
	// HeaderName is a request header, read into session's headers.
	HeaderName string `json:"headerName"`
	// CookieName is a cookie, read as session's cookie.
	CookieName string `json:"cookieName"`
}

// Notes of the session-id-producer translation.
const (
	noteAttribute      = "kvroute reads session keys from request headers and its cookie (session's headers and cookie), not from other plugins' request attributes; it reads a session-id-producer's header or cookie when a source names it ({attribute: " + sessionIDAttribute + ", producer: <its name>})"
	noteProducerUnread = "no session_id source of the session affinity kvroute carries over reads its attribute ({attribute: " + sessionIDAttribute + ", producer: <its name>}); kvroute reads the session key itself, from the request headers and the cookie session's headers and cookie name (kvroute-epp --session-config); " + noteSession
	noteCookieOrder    = "kvroute reads its cookie after every header, where llm-d reads the sources in their order: a request that carries both this cookie and a later source's header sticks by the header in kvroute"
)

// sessionIDProducers decodes the parameters of staged's
// session-id-producers, by plugin name. As in llm-d, a producer sets
// exactly one of headerName and cookieName (after trimming spaces).
func sessionIDProducers(staged []stagePlugin) (map[string]sessionIDParams, error) {
	out := map[string]sessionIDParams{}
	for _, p := range staged {
		if p.typ != sessionIDProducer {
			continue
		}
		var sp sessionIDParams
		at := p.path + ".parameters"
		if err := decodeStrict(p.params, &sp, at); err != nil {
			return nil, err
		}
		sp.HeaderName, sp.CookieName = strings.TrimSpace(sp.HeaderName), strings.TrimSpace(sp.CookieName)
		if (sp.HeaderName == "") == (sp.CookieName == "") {
			return nil, invalid(fmt.Errorf("%s: exactly one of headerName and cookieName must be set, as llm-d requires", at))
		}
		out[p.name] = sp
	}
	return out, nil
}

// unreadProducers reports each session-id-producer of staged whose
// attribute the translated session affinity does not read (read holds the
// names of those it reads).
func unreadProducers(staged []stagePlugin, read map[string]bool) []Finding {
	var out []Finding
	for _, p := range staged {
		if p.typ == sessionIDProducer && !read[p.name] {
			out = append(out, Finding{Path: p.path, Kind: Different, Note: noteProducerUnread})
		}
	}
	return out
}

// sourcesResult is what session_id's sources carry over: session's headers
// in their order, its cookie ("" for none), the session-id-producers read
// and the findings.
type sourcesResult struct {
	headers  []string
	cookie   string
	read     map[string]bool
	findings []Finding
}

// sessionSources translates session_id's sources (at path) into session's
// headers and cookie: a header source is a header, and a source naming a
// session-id-producer's attribute is that producer's header or cookie.
// kvroute reads one cookie, after every header.
func sessionSources(sources []sessionSource, path string, producers map[string]sessionIDParams) (sourcesResult, error) {
	res := sourcesResult{read: map[string]bool{}}
	cookieAt, headerAfter := "", false
	for i, s := range sources {
		at := fmt.Sprintf("%s[%d]", path, i)
		if (s.Header == "") == (s.Attribute == "") {
			return sourcesResult{}, invalid(fmt.Errorf("%s: exactly one of header and attribute must be set, as llm-d requires", at))
		}
		header := s.Header
		if header != "" && s.Producer != "" {
			res.findings = append(res.findings, Finding{Path: at + ".producer", Kind: NotNeeded, Note: "llm-d reads producer with an attribute only"})
		}
		if header == "" {
			prod, ok := producers[s.Producer]
			if s.Attribute != sessionIDAttribute || !ok {
				res.findings = append(res.findings, Finding{Path: at + ".attribute", Kind: NoEquivalent, Note: noteAttribute})
				continue
			}
			header = prod.HeaderName
			if header == "" {
				if cookieAt != "" {
					res.findings = append(res.findings, Finding{Path: at, Kind: NoEquivalent,
						Note: "kvroute reads one session cookie, " + res.cookie + " (" + cookieAt + "), so not " + prod.CookieName})
					continue
				}
				res.cookie, cookieAt = prod.CookieName, at
				res.read[s.Producer] = true
				continue
			}
			res.read[s.Producer] = true
		}
		res.headers = append(res.headers, header)
		headerAfter = headerAfter || cookieAt != ""
	}
	if headerAfter {
		res.findings = append(res.findings, Finding{Path: cookieAt, Kind: Different, Note: noteCookieOrder})
	}
	return res, nil
}
