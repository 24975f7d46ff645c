package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
)

// maxIdleConnsPerHost caps the idle keep-alive connections the private
// client keeps per host (the decoder, each prefiller): kvroute's gateway's
// default (gateway.DefaultMaxIdleConnsPerHost), above the concurrency one
// decode engine serves.
const maxIdleConnsPerHost = 1024

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
	return x.prefillText(ctx, target{hostPort: hostPort}, path, hdr, text, nil)
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
func (x *Exchange) prefillText(ctx context.Context, t target, path string, hdr http.Header, body []byte, c *copies) (Result, error) {
	res := Result{RequestID: requestID(hdr)}
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	// A target the prefill step cannot use falls back by that reason,
	// whether or not the budget has room for the copies below: it would
	// fall back without them.
	reason, why := x.unusableTarget(t)
	// The members' raw values are copies of theirs in body, together
	// never longer than it.
	if err := c.take(copyMembers, len(body)); err != nil {
		if reason != "" {
			return x.noRoom(res, body, false, reason, why)
		}
		return x.noRoom(res, body, false, ReasonBodyBudget, errNoCopyRoom)
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
	if reason != "" {
		return x.fallback(res, reason, why), nil
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
			return x.noRoom(res, body, true, ReasonBodyBudget, errNoCopyRoom)
		}
		return res, err
	}
	start := x.timeNow()
	pctx, cancel := context.WithTimeout(ctx, x.cfg.PrefillTimeout)
	defer cancel()
	params, reason, err := x.prefill(pctx, t.url(x.cfg.PrefillerScheme, path), hdr, res.RequestID, pbody)
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
		return x.noRoom(res, body, true, ReasonBodyBudget, errNoCopyRoom)
	}
	if err != nil {
		return res, err
	}
	res.DecodeBody, res.Split, res.Params = dbody, true, params
	x.m.requests.WithLabelValues(OutcomeSplit).Inc()
	return res, nil
}

// unusableTarget returns the fallback reason and its cause when the
// prefill step cannot use t (ReasonBadTarget, ReasonNotAllowed) or the
// body may go to no prefiller (ReasonBodyTooLarge), "" when it can.
func (x *Exchange) unusableTarget(t target) (reason string, why error) {
	if t.over != nil {
		return ReasonBodyTooLarge, t.over
	}
	if t.bad != "" {
		return ReasonBadTarget, fmt.Errorf("invalid prefiller URL %q", truncate(t.bad))
	}
	if !ValidTarget(t.hostPort) {
		return ReasonBadTarget, fmt.Errorf("invalid %s %q", PrefillerHeader, truncate(t.hostPort))
	}
	if x.allow != nil && !x.allow(t.hostPort) {
		return ReasonNotAllowed, fmt.Errorf("prefiller %q not allowed", t.hostPort)
	}
	return "", nil
}

// errNoCopyRoom is the cause of a ReasonBodyBudget fallback.
var errNoCopyRoom = errors.New("no room in the budget of body bytes in flight for the copies a split makes")

// noRoom gives the prefill step up, by reason (ReasonBodyBudget, or the
// target's own reason when it was unusable anyway), when the budget
// prefillText charges has no room for a copy of body (a UTF-8 JSON
// object): the decoder gets res.LocalBody (local: made already), or,
// before the body was parsed, body itself, unless it carries
// kv_transfer_params of its own, which only a copy could drop
// (bytebudget.ErrNoRoom then).
func (x *Exchange) noRoom(res Result, body []byte, local bool, reason string, why error) (Result, error) {
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
	return x.fallback(res, reason, why), nil
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

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
