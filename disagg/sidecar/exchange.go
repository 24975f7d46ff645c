package sidecar

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/telemetry"
)

// PrefillerHeader carries the prefill endpoint ("host:port") to the decode
// pod, as llm-d's router sets it. Package disagg's HeaderPrefiller, the
// name kvroute's router sets, is this constant.
const PrefillerHeader = "x-prefiller-host-port"

// PrefillerHeaderLLMD is llm-d's current name of PrefillerHeader. llm-d's
// router writes both names with the same value, and its sidecar trusts the
// pre-convention one first (every router that strips client values strips
// that one); a router that has retired it writes only this one. The
// sidecar reads it when PrefillerHeader is absent, and kvroute's router
// writes both.
const PrefillerHeaderLLMD = "x-llm-d-prefiller-host-port"

// prefillerTarget is the prefill endpoint a request names: PrefillerHeader,
// else PrefillerHeaderLLMD (llm-d's order of trust). Of a comma-separated
// list (a proxy may join repeated header lines into one, RFC 9110 §5.3),
// the first is taken, as llm-d's sidecar takes it.
func prefillerTarget(h http.Header) string {
	if t := firstListed(h.Get(PrefillerHeader)); t != "" {
		return t
	}
	return firstListed(h.Get(PrefillerHeaderLLMD))
}

// firstListed is the first element of the comma-separated list v, without
// surrounding spaces.
func firstListed(v string) string {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// RequestIDHeader is the request ID vLLM adopts as its own; both halves of a
// split request carry the same one.
const RequestIDHeader = "X-Request-Id"

// Defaults of Config.
const (
	DefaultPrefillTimeout      = 30 * time.Second
	DefaultMaxBodyBytes        = 32 << 20
	DefaultMaxPrefillRespBytes = 1 << 20
	DefaultPrefillerScheme     = "http"
	// DefaultBodyReadTimeout is the default of Config.BodyReadTimeout, the
	// kvroute gateway's.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultResponseWriteTimeout is the default of
	// Config.ResponseWriteTimeout, the kvroute gateway's.
	DefaultResponseWriteTimeout = time.Minute
	// DefaultMaxBodyBytesInFlight is the default of
	// Config.MaxBodyBytesInFlight, the kvroute gateway's: 512 MiB, sixteen
	// bodies at DefaultMaxBodyBytes or thousands of ordinary prompts.
	DefaultMaxBodyBytesInFlight = bytebudget.DefaultBodyBytesInFlight
)

// maxIdleConnsPerHost caps the idle keep-alive connections the private
// client keeps per host (the decoder, each prefiller): kvroute's gateway's
// default (gateway.DefaultMaxIdleConnsPerHost), above the concurrency one
// decode engine serves.
const maxIdleConnsPerHost = 1024

// maxTargetLen bounds a prefiller address (a DNS name is at most 253
// bytes, plus the port).
const maxTargetLen = 261

// Fallback reasons: why a request with a prefiller ran its prefill on the
// decoder instead. They are the reason label values of
// kvroute_sidecar_prefill_fallbacks_total.
const (
	// ReasonBadTarget: the header is not a valid host:port.
	ReasonBadTarget = "bad_target"
	// ReasonUnreachable: the prefiller refused or dropped the connection.
	ReasonUnreachable = "unreachable"
	// ReasonTimeout: no answer within Config.PrefillTimeout.
	ReasonTimeout = "timeout"
	// ReasonStatus: the prefiller answered a non-2xx status.
	ReasonStatus = "status"
	// ReasonBadResponse: the answer was too large, not JSON, or carried no
	// usable kv_transfer_params.
	ReasonBadResponse = "bad_response"
	// ReasonNotAllowed: Options.AllowTarget refused the address (the
	// server-side request forgery guard llm-d's sidecar has as an
	// allowlist of the pool's pods).
	ReasonNotAllowed = "not_allowed"
	// ReasonForcedTool: a Messages request forcing a named tool
	// (tool_choice {"type":"tool"}), not sent to the prefiller: vLLM
	// decodes the generated text as the tool call's JSON input, which one
	// token is not, and fails the prefill (forcesNamedTool).
	ReasonForcedTool = "forced_tool"
	// ReasonBodyBudget: a Handler's budget of Config.MaxBodyBytesInFlight
	// (or the one Exchange.PrefillWithin is given) had room for the body
	// but not for the copies a split makes of it, so the decoder gets the
	// body alone (see Handler).
	ReasonBodyBudget = "body_budget"
)

// Reasons lists every fallback reason, the label values' fixed set.
var Reasons = []string{ReasonBadTarget, ReasonUnreachable, ReasonTimeout, ReasonStatus, ReasonBadResponse, ReasonNotAllowed, ReasonForcedTool, ReasonBodyBudget}

// Config configures an Exchange (and a Handler). The zero value works: every
// zero field takes its default.
type Config struct {
	// DecoderURL is the local decode engine ("http://127.0.0.1:8001"); only
	// the Handler uses it.
	DecoderURL string `json:"decoderURL"`
	// PrefillTimeout bounds the prefill step (connect to last byte); past it
	// the request falls back to a local prefill. Default 30s.
	PrefillTimeout time.Duration `json:"prefillTimeout"`
	// MaxBodyBytes bounds the client request body: the Exchange's, and
	// every request a Handler serves (each is read whole before it goes to
	// the decoder; a larger one is answered 413). Default 32 MiB.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxPrefillResponseBytes bounds the prefiller's answer (one token and
	// the transfer parameters). Default 1 MiB.
	MaxPrefillResponseBytes int64 `json:"maxPrefillResponseBytes"`
	// PrefillerScheme is the scheme used to reach host:port. Default "http".
	PrefillerScheme string `json:"prefillerScheme"`
	// BodyReadTimeout bounds, in a Handler, the reading of a request's
	// body from the end of its header: a client that has not sent it
	// whole by then is answered 408 and its connection closed, so that a
	// slow or stalled client cannot hold a connection and its buffer for as
	// long as it likes. Default 30s. Only a Handler reads bodies, so the
	// field is not part of Config's JSON (a gateway's exchange block).
	BodyReadTimeout time.Duration `json:"-"`
	// MaxBodyBytesInFlight bounds the request body bytes a Handler holds
	// at once, over all requests: the bodies as they came and the copies
	// a split makes of them (a wide body's UTF-8 copy; during the prefill
	// step its parsed members and the prefill body, so that a split holds
	// about three times its body then; while the decoder answers, the
	// decode body in place of the client's). A split whose copies find no
	// room goes to the decoder as it came, for a local prefill counted as
	// ReasonBodyBudget, before the prefiller is sent anything; a body that
	// finds no room itself (or a split's that needs a copy to go to the
	// decoder alone: one with kv_transfer_params of its own to drop, or a
	// UTF-16 or UTF-32 one) is answered 503 at once (Retry-After), so
	// that many concurrent clients, each within MaxBodyBytes, cannot
	// together grow the sidecar's memory without bound. It may not be
	// below MaxBodyBytes (a split body over a third of it then always
	// prefills locally).
	// Default 512 MiB, or MaxBodyBytes when larger. A Handler's only, like
	// BodyReadTimeout.
	MaxBodyBytesInFlight int64 `json:"-"`
	// ResponseWriteTimeout bounds, in a Handler, how long each write of a
	// response to the client may wait for the client to take it. A client
	// that stops reading (a stalled connection, a stream it never drains)
	// would otherwise hold its request open for as long as it keeps the
	// connection: its body's share of MaxBodyBytesInFlight, which other
	// clients' bodies then find full, and its decoder request. Past it the
	// response is cut, the decoder request ended, and the request counted
	// as client_stalled. The deadline restarts at every write, so a slow
	// stream the client keeps reading is never cut. Default 1m, the
	// kvroute gateway's. A Handler's only, like BodyReadTimeout.
	ResponseWriteTimeout time.Duration `json:"-"`
	// AllowClientKVTransferParams passes on, in a Handler, the
	// kv_transfer_params member a client's body carries on a request it
	// does not split, as the kvroute gateway's field of the name does. By
	// default the Handler removes it from every request (counted in
	// kvroute_sidecar_client_transfer_params_removed_total): vLLM's KV
	// connectors act on it, and a client's do_remote_prefill with its own
	// remote_host would make the decoder pull KV blocks from whatever
	// address the client names. A split request's transfer parameters are
	// the exchange's whatever it says (a fallback's none). Set it only
	// behind a trusted component that sets them itself. A Handler's only,
	// like BodyReadTimeout.
	AllowClientKVTransferParams bool `json:"-"`
}

func (c Config) withDefaults() (Config, error) {
	if c.PrefillTimeout == 0 {
		c.PrefillTimeout = DefaultPrefillTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxPrefillResponseBytes == 0 {
		c.MaxPrefillResponseBytes = DefaultMaxPrefillRespBytes
	}
	if c.PrefillerScheme == "" {
		c.PrefillerScheme = DefaultPrefillerScheme
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.ResponseWriteTimeout == 0 {
		c.ResponseWriteTimeout = DefaultResponseWriteTimeout
	}
	if c.MaxBodyBytesInFlight == 0 {
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, c.MaxBodyBytes)
	}
	switch {
	case c.PrefillTimeout < 0:
		return c, fmt.Errorf("sidecar: prefillTimeout %v < 0", c.PrefillTimeout)
	case c.BodyReadTimeout < 0:
		return c, fmt.Errorf("sidecar: bodyReadTimeout %v < 0", c.BodyReadTimeout)
	case c.ResponseWriteTimeout < 0:
		return c, fmt.Errorf("sidecar: responseWriteTimeout %v < 0", c.ResponseWriteTimeout)
	case c.MaxBodyBytes < 0 || c.MaxPrefillResponseBytes < 0 || c.MaxBodyBytesInFlight < 0:
		return c, errors.New("sidecar: maxBodyBytes, maxPrefillResponseBytes and maxBodyBytesInFlight must be positive")
	case c.MaxBodyBytesInFlight < c.MaxBodyBytes:
		return c, fmt.Errorf("sidecar: maxBodyBytesInFlight %d is below maxBodyBytes %d: a body at the limit could never be served", c.MaxBodyBytesInFlight, c.MaxBodyBytes)
	case c.PrefillerScheme != "http" && c.PrefillerScheme != "https":
		return c, fmt.Errorf("sidecar: prefillerScheme %q is not http or https", c.PrefillerScheme)
	}
	return c, nil
}

// Options are an Exchange's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the exchange's observability, as every kvroute component
	// takes it: Registerer receives the kvroute_sidecar_* metrics (nil
	// registers none; all or none, see package telemetry), Logger the
	// fallbacks and errors (nil discards). The exchange has no spans and no
	// timers of its own: TracerProvider and Clock are not read
	// (Result.PrefillDuration is measured on the wall clock, to be
	// reported).
	telemetry.Set
	// Client sends the prefill requests (and, in a Handler, carries the
	// decoder's transport); nil uses a private client with its own
	// transport, closed by Close, which reaches every address directly
	// (no proxy from the environment) and keeps as many idle connections
	// to a host as were in flight to it at once. The Exchange uses a copy of it that
	// follows no redirect, whatever the given client's CheckRedirect.
	Client *http.Client
	// AllowTarget, when set, vets every prefiller address (a valid
	// host:port) before it is contacted; a refused one falls back to a local
	// prefill (ReasonNotAllowed). It must be safe for concurrent use. Nil
	// allows every address: the header then must come from a trusted router.
	AllowTarget func(hostPort string) bool
}

// Result is the outcome of Exchange.Prefill.
type Result struct {
	// DecodeBody is what to send to the decoder: the client body with the
	// prefiller's kv_transfer_params when Split, else the client body
	// without any kv_transfer_params of its own (the decoder prefills
	// locally: a client's do_remote_prefill would otherwise have it pull
	// KV blocks from whatever address the client named).
	DecodeBody []byte
	// LocalBody is the client body without any kv_transfer_params of its
	// own: DecodeBody on a fallback, and what a retry that has the decoder
	// prefill locally must send (the client body itself when it has none).
	LocalBody []byte
	// Split reports that the prefiller computed the prompt and the decoder
	// will pull its KV blocks.
	Split bool
	// Fallback is the reason (one of Reasons) the prefill step was given
	// up, "" when Split.
	Fallback string
	// Params is the prefiller's kv_transfer_params (nil unless Split).
	Params json.RawMessage
	// RequestID is the X-Request-Id both halves carry: the client's, or a
	// fresh one. Send it on the decode request.
	RequestID string
	// PrefillDuration is how long the prefill step took.
	PrefillDuration time.Duration
	// clientParams reports that the client body carried kv_transfer_params
	// of its own, which neither DecodeBody nor LocalBody carries.
	clientParams bool
}

// Exchange runs the prefill half of a disaggregated request: the step a
// decode pod's sidecar (or a gateway configured to do it itself) takes
// before sending the request to the decoder. It is safe for concurrent use
// and owns no goroutine; Close releases idle connections of its private
// client and unregisters its metrics.
type Exchange struct {
	cfg     Config
	client  *http.Client
	own     bool
	lg      *slog.Logger
	allow   func(string) bool
	m       *metrics
	timeNow func() time.Time
}

// NewExchange validates cfg and builds an Exchange.
func NewExchange(cfg Config, opts Options) (*Exchange, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	x := &Exchange{cfg: cfg, lg: opts.Log(), allow: opts.AllowTarget, timeNow: time.Now}
	if opts.Client != nil {
		c := *opts.Client // a copy: the caller's client keeps its own redirect policy
		x.client = &c
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Prefillers and the decoder are pods of the cluster, reached
		// directly: an HTTP_PROXY or HTTPS_PROXY meant for the process's
		// other traffic must not carry request bodies to a proxy, nor
		// past the address AllowTarget vetted.
		tr.Proxy = nil
		// Every request goes to the decoder, and each split one to a
		// prefiller: net/http's default of two idle connections per host
		// (and 100 in all) would close the rest after each burst and
		// redial them in the next, leaving sockets in TIME_WAIT and a dial
		// on the requests' path. The pool only ever holds as many
		// connections as were in flight to a host at once.
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, maxIdleConnsPerHost
		x.client = &http.Client{Transport: tr}
		x.own = true
	}
	// A redirect is an answer, never followed: following it would resend
	// the client's prompt and headers to an address AllowTarget never saw
	// (a prefiller's 3xx falls back as ReasonStatus).
	x.client.CheckRedirect = refuseRedirect
	if x.m, err = newMetrics(opts.Set); err != nil {
		return nil, err
	}
	return x, nil
}

// refuseRedirect is the Exchange's client's CheckRedirect: the 3xx
// response itself is returned, its Location not followed.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Config returns the configuration with defaults filled in.
func (x *Exchange) Config() Config { return x.cfg }

// Close releases the idle connections of the Exchange's private client and
// unregisters the metrics NewExchange registered, so that another Exchange
// can be built on the same registry. The Exchange must not be used after.
func (x *Exchange) Close() {
	if x.own {
		x.client.CloseIdleConnections()
	}
	x.m.unregister()
}

// ValidTarget reports whether hostPort is a usable prefiller address: a
// host and a port of 1 to 65535 in decimal digits, nothing else. The host
// is an IPv4 address, an IPv6 address in brackets (no zone), or a DNS name
// (labels of letters, digits, hyphens and underscores, none starting or
// ending with a hyphen, an optional final dot). No scheme, path, user
// info, control character, space or other punctuation gets through, so
// an Options.AllowTarget sees only addresses the prefill request's URL
// carries exactly.
func ValidTarget(hostPort string) bool {
	if len(hostPort) == 0 || len(hostPort) > maxTargetLen {
		return false
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || !validPort(port) {
		return false
	}
	if hostPort[0] == '[' {
		a, err := netip.ParseAddr(host)
		return err == nil && a.Is6() && a.Zone() == ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Is4()
	}
	return validHostName(host)
}

// validPort reports whether port is 1 to 65535 in at most five decimal
// digits (strconv.Atoi would take a sign, and many leading zeros).
func validPort(port string) bool {
	if len(port) == 0 || len(port) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// validHostName reports whether host is a DNS name: dot-separated labels
// of 1 to 63 letters, digits, hyphens or underscores, none starting or
// ending with a hyphen, with an optional final dot.
func validHostName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Prefill sends the client request body to the prefiller at hostPort on
// path (the client's path, e.g. "/v1/chat/completions", one SplitPath
// accepts) with max_tokens 1 (max_output_tokens 1 and store false on
// ResponsesPath, see PrefillBody),
// stream false and kv_transfer_params asking for a remote decode, and
// returns the body for the decoder. hdr (may be nil) is copied onto the
// prefill request except hop-by-hop headers, Content-Length and
// PrefillerHeader.
//
// Any failure of the prefill step (bad address, connection refused, the
// PrefillTimeout deadline, a non-2xx status, an answer without usable
// kv_transfer_params) is not an error: the Result then has Split false, the
// reason in Fallback and the client body unchanged in DecodeBody, so the
// decoder prefills locally; it is counted by reason. The error is non-nil
// only when the client body itself is unusable (ErrBadRequest) or ctx ended
// (the client went away).
//
// body is read as vLLM reads a request body: past a leading UTF-8 byte
// order mark, and decoded from UTF-16 or UTF-32 (Config.MaxBodyBytes
// bounds it as it came); DecodeBody and LocalBody are then UTF-8.
func (x *Exchange) Prefill(ctx context.Context, hostPort, path string, hdr http.Header, body []byte) (Result, error) {
	if int64(len(body)) > x.cfg.MaxBodyBytes {
		return Result{RequestID: requestID(hdr)}, fmt.Errorf("%w: %w: %d bytes, limit %d", ErrBadRequest, ErrTooLarge, len(body), x.cfg.MaxBodyBytes)
	}
	text, err := jsonText(body)
	if err != nil {
		return Result{RequestID: requestID(hdr)}, err
	}
	return x.prefillText(ctx, hostPort, path, hdr, text, nil)
}

// prefillText is Prefill on a body already read as vLLM reads it (UTF-8,
// no byte order mark) and within Config.MaxBodyBytes as it came. The
// copies it makes of body are charged to c (nil: to nothing) before they
// are made: the parsed members and the prefill body, given back as they
// are dropped (by the time prefillText returns), and LocalBody and
// DecodeBody when they are copies, which the caller gives back
// (copyLocal, copyDecode) once done with them. A copy that finds no room
// gives the prefill step up (ReasonBodyBudget, noRoom), before the
// prefiller is sent anything unless the decode body outgrew the prefill
// body's room; bytebudget.ErrNoRoom when LocalBody itself is a copy that
// finds none.
func (x *Exchange) prefillText(ctx context.Context, hostPort, path string, hdr http.Header, body []byte, c *copies) (Result, error) {
	res := Result{RequestID: requestID(hdr)}
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	// The members' raw values are copies of theirs in body, together
	// never longer than it.
	if err := c.take(copyMembers, len(body)); err != nil {
		return x.noRoom(res, body, false)
	}
	defer c.release(copyMembers)
	parsed, err := parseObject(body)
	if err != nil {
		return res, err
	}
	_, res.clientParams = parsed[fieldKVTransferParams]
	if res.LocalBody, err = localBody(parsed, body, c.reserve(copyLocal)); err != nil {
		return res, err
	}
	if !ValidTarget(hostPort) {
		return x.fallback(res, ReasonBadTarget, fmt.Errorf("invalid %s %q", PrefillerHeader, truncate(hostPort))), nil
	}
	if x.allow != nil && !x.allow(hostPort) {
		return x.fallback(res, ReasonNotAllowed, fmt.Errorf("prefiller %q not allowed", hostPort)), nil
	}
	if path == MessagesPath && forcesNamedTool(parsed) {
		return x.fallback(res, ReasonForcedTool, errors.New("a Messages request forcing a named tool: vLLM fails its one-token prefill")), nil
	}
	// The prefill body's charge is kept past the prefiller's answer, for
	// the decode body (moveTo): the room the prefill step found is the
	// decode body's, reserved before the prefiller is sent anything.
	pbody, err := prefillBody(parsed, path, c.reserve(copyPrefill))
	defer c.release(copyPrefill) // also when it found no room: what it took
	if err != nil {
		if errors.Is(err, bytebudget.ErrNoRoom) {
			c.release(copyPrefill)
			return x.noRoom(res, body, true)
		}
		return res, err
	}
	start := x.timeNow()
	pctx, cancel := context.WithTimeout(ctx, x.cfg.PrefillTimeout)
	defer cancel()
	params, reason, err := x.prefill(pctx, x.cfg.PrefillerScheme+"://"+hostPort+path, hdr, res.RequestID, pbody)
	res.PrefillDuration = x.timeNow().Sub(start)
	x.m.prefillSeconds.Observe(res.PrefillDuration.Seconds())
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("sidecar: client gone during prefill: %w", ctx.Err())
		}
		return x.fallback(res, reason, err), nil
	}
	// The decode body takes the prefill body's charge and asks the budget
	// only for what it is longer (the prefiller's transfer parameters
	// against the ones it was sent): without room for that, the prefill
	// the prefiller made is given up, the one case that wastes it.
	dbody, err := decodeBody(parsed, params, c.moveTo(copyPrefill, copyDecode))
	if errors.Is(err, bytebudget.ErrNoRoom) {
		c.release(copyDecode)
		return x.noRoom(res, body, true)
	}
	if err != nil {
		return res, err
	}
	res.DecodeBody, res.Split, res.Params = dbody, true, params
	x.m.requests.WithLabelValues(OutcomeSplit).Inc()
	return res, nil
}

// noRoom gives the prefill step up for want of room, in the budget
// prefillText charges, for a copy of body (a UTF-8 JSON object): the
// decoder gets res.LocalBody (local: made already), or, before the body
// was parsed, body itself, unless it carries kv_transfer_params of its
// own, which only a copy could drop (bytebudget.ErrNoRoom then).
func (x *Exchange) noRoom(res Result, body []byte, local bool) (Result, error) {
	if !local {
		var v [1][]byte
		if err := jsonscan.Members(body, transferParamsMember, v[:]); err != nil {
			return res, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		if v[0] != nil {
			return res, bytebudget.ErrNoRoom
		}
		res.LocalBody = body
	}
	return x.fallback(res, ReasonBodyBudget, errors.New("no room in the budget of body bytes in flight for the copies a split makes")), nil
}

// fallback gives the prefill step up: the decoder gets res.LocalBody, the
// client body without any kv_transfer_params of the client's own, and
// prefills it.
func (x *Exchange) fallback(res Result, reason string, err error) Result {
	res.DecodeBody, res.Fallback = res.LocalBody, reason
	x.m.fallbacks.WithLabelValues(reason).Inc()
	x.m.requests.WithLabelValues(OutcomeFallback).Inc()
	x.lg.Warn("prefill failed, decoding with a local prefill", "reason", reason, "err", err, "request_id", res.RequestID)
	return res
}

// prefill does the HTTP round trip and returns the transfer parameters, or
// the fallback reason and the cause.
func (x *Exchange) prefill(ctx context.Context, url string, hdr http.Header, id string, pbody []byte) (json.RawMessage, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(pbody))
	if err != nil {
		return nil, ReasonBadTarget, err
	}
	copyHeaders(req.Header, hdr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(RequestIDHeader, id)
	resp, err := x.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ReasonTimeout, err
		}
		return nil, ReasonUnreachable, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The status is the answer: its body is read only for the log,
		// a little of it, and a body that then stalls or breaks off
		// leaves the reason the status (not timeout or unreachable).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, ReasonStatus, fmt.Errorf("prefiller answered %d: %s", resp.StatusCode, truncate(string(b)))
	}
	b, err := io.ReadAll(bytebudget.LimitPastCap(resp.Body, x.cfg.MaxPrefillResponseBytes))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ReasonTimeout, err
		}
		return nil, ReasonUnreachable, err
	}
	if int64(len(b)) > x.cfg.MaxPrefillResponseBytes {
		return nil, ReasonBadResponse, fmt.Errorf("%w: prefiller answer over %d bytes", ErrTooLarge, x.cfg.MaxPrefillResponseBytes)
	}
	params, err := TransferParams(b)
	if err != nil {
		return nil, ReasonBadResponse, err
	}
	return params, "", nil
}

// hopHeaders are not forwarded (RFC 9110 §7.6.1), nor the ones the
// exchange sets itself, nor Expect: the prefill request sends its body at
// once, and a 100-continue was the client's exchange with the sidecar.
var hopHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Accept-Encoding": true, "Expect": true, http.CanonicalHeaderKey(PrefillerHeader): true, http.CanonicalHeaderKey(PrefillerHeaderLLMD): true,
}

// copyHeaders copies src's end-to-end headers into dst: not hopHeaders,
// and not the headers src's Connection header names, which are scoped to
// the client's connection as the hop-by-hop ones are.
func copyHeaders(dst, src http.Header) {
	var named map[string]bool
	for _, v := range src.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = textproto.TrimString(tok); tok != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(tok)] = true
			}
		}
	}
	for k, vs := range src {
		if ck := http.CanonicalHeaderKey(k); hopHeaders[ck] || named[ck] {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// requestID returns the client's X-Request-Id when it is short and
// printable, else a fresh random one.
func requestID(hdr http.Header) string {
	if id := hdr.Get(RequestIDHeader); id != "" && len(id) <= 128 && printable(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "pd-" + hex.EncodeToString(b[:])
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
