package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// How the gateway carries out a split decision (DisaggHostConfig.Mode).
const (
	// DisaggModeHeader forwards a split request to its decode endpoint with
	// the prefill endpoint named in x-prefiller-host-port, for the decode
	// pod's routing sidecar (llm-d's, or cmd/kvroute-sidecar) to run the
	// two-step exchange. The default.
	DisaggModeHeader = "header"
	// DisaggModeExchange runs the two-step exchange in the gateway itself
	// (sidecar.Exchange): the prefill request to the prefill endpoint, then
	// the decode request, with the transfer parameters the prefiller
	// returned, to the decode endpoint. Decode pods need no sidecar.
	DisaggModeExchange = "exchange"
)

// HeaderPrefillFallback is set on the response of a split request whose
// prefill step failed in exchange mode: its value is the reason (one of
// sidecar.Reasons, or FallbackDecodeFailed), and the decode endpoint
// prefilled locally.
const HeaderPrefillFallback = "X-Kvroute-Prefill-Fallback"

// FallbackDecodeFailed is HeaderPrefillFallback's value when the decode
// endpoint failed the request after the prefill step (a vLLM decoder whose
// KV transfer failed under kv_load_failure_policy "fail" answers 500) and
// the gateway sent it again without the transfer parameters, for a local
// prefill (exchange mode; counted in
// kvroute_gateway_disagg_decode_retries_total).
const FallbackDecodeFailed = "decode_failed"

// exchangeState is the exchange mode's part of a Handler.
type exchangeState struct {
	x       *sidecar.Exchange
	retries prometheus.Counter    // kvroute_gateway_disagg_decode_retries_total
	reg     prometheus.Registerer // where x's metrics and retries are registered; nil: none
}

// retriesHelp is kvroute_gateway_disagg_decode_retries_total's help.
const retriesHelp = "Split requests (exchange mode) whose decode endpoint answered a 5xx after the prefill step, such as a vLLM decoder whose KV transfer failed under kv_load_failure_policy fail, sent to it once more without the transfer parameters to prefill locally."

// newExchangeState builds the exchange over transport (the gateway's own
// upstream connections) with its metrics and the gateway's on reg.
func newExchangeState(cfg sidecar.Config, reg prometheus.Registerer, lg *slog.Logger, transport http.RoundTripper) (*exchangeState, error) {
	x, err := sidecar.NewExchange(cfg, sidecar.Options{Set: telemetry.Set{Registerer: reg, Logger: lg}, Client: &http.Client{Transport: transport}})
	if err != nil {
		return nil, err
	}
	retries := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_gateway_disagg_decode_retries_total",
		Help: retriesHelp,
	})
	if reg != nil {
		if err := reg.Register(retries); err != nil {
			x.Close() // unregisters the exchange's metrics: all or none
			return nil, err
		}
	}
	return &exchangeState{x: x, retries: retries, reg: reg}, nil
}

// close releases the exchange and unregisters the metrics newExchangeState
// registered.
func (e *exchangeState) close() {
	e.x.Close()
	if e.reg != nil {
		e.reg.Unregister(e.retries)
	}
}

// DisaggHostConfig is how the gateway carries out the disagg profile's
// split decisions (the "mode" and "exchange" keys of the gateway's
// "disagg" block). The zero value is header mode.
type DisaggHostConfig struct {
	// Mode is DisaggModeHeader ("" means it) or DisaggModeExchange.
	Mode string `json:"mode"`
	// Exchange configures the exchange mode's prefill step: its
	// PrefillTimeout is the deadline past which the decode endpoint
	// prefills locally (counted in
	// kvroute_sidecar_prefill_fallbacks_total{reason="timeout"}), and
	// MaxBodyBytes, MaxPrefillResponseBytes and PrefillerScheme bound and
	// address the prefill request. A split body over MaxBodyBytes goes to
	// no prefiller: the decode endpoint prefills it (HeaderPrefillFallback
	// body_too_large, counted as that reason). The prefill request goes to
	// the prefill endpoint's Address (its scheme and any path prefix) when
	// it has one, as the decode request goes to the decode endpoint's;
	// PrefillerScheme is the scheme of an endpoint named by its ID
	// (host:port) alone. DecoderURL must be empty: the decode endpoint is
	// the decision's. Zero fields take sidecar's defaults, but for a zero
	// MaxBodyBytes, which a Server sets to Config.MaxBodyBytes when that is
	// larger, so that every body the gateway takes may be split; a lower
	// MaxBodyBytes keeps larger bodies off the prefillers.
	Exchange sidecar.Config `json:"exchange"`
}

// Validate reports an unknown mode, a DecoderURL, or an invalid exchange
// configuration.
func (c DisaggHostConfig) Validate() error {
	switch c.Mode {
	case "", DisaggModeHeader, DisaggModeExchange:
	default:
		return fmt.Errorf("gateway: disagg mode %q is not %q or %q", c.Mode, DisaggModeHeader, DisaggModeExchange)
	}
	if c.Exchange.DecoderURL != "" {
		return errors.New("gateway: disagg exchange.decoderURL is the sidecar's: in the gateway the decode endpoint is the decision's")
	}
	if _, err := sidecar.NewExchange(c.Exchange, sidecar.Options{}); err != nil {
		return fmt.Errorf("gateway: disagg exchange: %w", err)
	}
	return nil
}

// ValidateFor is Validate for the profile d's split decisions: in exchange
// mode it also reports an API in d.SplitAPIs whose route the exchange does
// not split (sidecar.SplitPath), whose requests would be decided split and
// prefilled by their decode endpoint anyway. The exchange splits every API
// kvroute routes (completions, chat completions, Responses and Messages),
// so only a name that is no API is reported.
func (c DisaggHostConfig) ValidateFor(d disagg.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Mode != DisaggModeExchange {
		return nil
	}
	for _, api := range d.SplitAPIs {
		if p, ok := apiPath(api); !ok || !sidecar.SplitPath(p) {
			return fmt.Errorf("gateway: disagg splitAPIs names %q, which the exchange mode does not split", api)
		}
	}
	return nil
}

// apiPath is api's route.
func apiPath(api render.API) (string, bool) {
	for _, p := range [...]string{"/v1/completions", "/v1/chat/completions", "/v1/messages", sidecar.ResponsesPath} {
		if a, _ := render.APIForPath(p); a == api {
			return p, true
		}
	}
	return "", false
}

// errPrefillFallback ends the prefill role of a split request whose prefill
// step failed: the decode endpoint prefills it.
var errPrefillFallback = errors.New("gateway: prefill step failed, the decode endpoint prefills locally")

// exchange runs the prefill half of split decision d in exchange mode and
// returns the body to send to the decode endpoint and the client body
// without transfer parameters of its own (what a retry with a local
// prefill sends), with hdr's X-Request-Id
// set to the one both halves carry. It ends the prefill role of d at the
// prefiller's answer (its one token: nothing more is asked of it) or at a
// fallback (d.Endpoint prefills locally); d itself is the caller's to end.
// Every copy of the body the exchange makes is charged to the body budget
// before it is made (sidecar.Exchange.PrefillWithin): the parsed members
// and the prefill body while the prefill step runs, and the decode body,
// whose room is the prefill body's, reserved before the prefiller is sent
// anything; held is what the copies kept for the decode request take (the
// decode body, the local body when the client's own parameters were
// kept), which the caller releases after the response. A split whose
// copies find no room is not sent to the prefiller: the decode endpoint
// gets the body as it came and prefills it, as on any failed prefill
// step (HeaderPrefillFallback body_budget); only one that cannot go even
// so without a copy that finds no room is answered 503 body_budget, the
// prefiller untouched either way.
func (h *Handler) exchange(w http.ResponseWriter, r *http.Request, hdr http.Header, body []byte, d *kvroute.Decision) (out, local []byte, fallback string, held int64, res Result, err error) {
	pre := d.Roles[0]
	if !sidecar.SplitPath(r.URL.Path) || r.Method != http.MethodPost {
		// The exchange runs on the routes whose bodies carry vLLM's
		// kv_transfer_params (completions, chat completions, Responses,
		// Messages):
		// the decode endpoint prefills any other request itself.
		h.log.Debug("split decision on a route without KV transfer: prefilled locally", "path", r.URL.Path)
		pre.Done(kvroute.DoneInfo{Err: errPrefillFallback})
		h.notify(d)
		return body, body, "", 0, "", nil
	}
	var xr sidecar.Result
	if pre.Endpoint.Address != "" {
		// At its Address, scheme and path prefix included, as the decode
		// request goes to the decode endpoint's.
		xr, held, err = h.exchanger.x.PrefillURLWithin(r.Context(), pre.Endpoint.Address, r.URL.Path, hdr, body, &h.budget)
	} else {
		xr, held, err = h.exchanger.x.PrefillWithin(r.Context(), pre.Endpoint.ID, r.URL.Path, hdr, body, &h.budget)
	}
	if err != nil {
		pre.Done(kvroute.DoneInfo{Err: err})
		h.notify(d)
		if r.Context().Err() != nil {
			return nil, nil, "", 0, ResultClientAbort, context.Cause(r.Context())
		}
		api := apiOf(r)
		if errors.Is(err, sidecar.ErrNoRoom) {
			h.writeBodyBudget(w, api) // counted by the caller, as the other refusals
			return nil, nil, "", 0, ResultBodyBudget, errBodyBudget
		}
		writeError(w, api, http.StatusBadRequest, err.Error())
		return nil, nil, "", 0, ResultBadRequest, err
	}
	if xr.Split {
		pre.FirstChunk() // its one token came back: a prefill-only pick ends its part whole
	} else {
		pre.Done(kvroute.DoneInfo{Err: errPrefillFallback})
	}
	h.notify(d)
	hdr[headerRequestID] = []string{xr.RequestID}
	return xr.DecodeBody, xr.LocalBody, xr.Fallback, held, "", nil
}

// endpointHostPort is the host:port requests to e go to (and the
// gateway's transport pools their connections under): the endpoint's ID, or
// the host of its Address when it has one, the value header mode names a
// prefill endpoint by.
func endpointHostPort(e kvroute.Endpoint) string {
	return disagg.PrefillerHostPort(e)
}

// retryLocal sends out once more to the decode endpoint with body, the
// client's body without transfer parameters (its own removed too), after the decode endpoint
// failed the split request with a 5xx (failed, whose body is drained and
// closed): the decode endpoint prefills locally. It returns the new
// response or the transport's error.
func (h *Handler) retryLocal(out *http.Request, failed *http.Response, body []byte) (*http.Response, error) {
	h.exchanger.retries.Inc()
	h.log.Warn("decode endpoint failed a split request, retrying it with a local prefill", "endpoint", out.URL.Host, "status", failed.StatusCode)
	_, _ = io.Copy(io.Discard, io.LimitReader(failed.Body, 64<<10))
	_ = failed.Body.Close()
	again := out.Clone(out.Context())
	again.Body = io.NopCloser(bytes.NewReader(body))
	// The clone's GetBody would give the exchanged body back: a resend on
	// a new connection must send this one.
	again.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	again.ContentLength = int64(len(body))
	return h.transport.RoundTrip(again)
}
