package gateway

import (
	"fmt"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// DefaultMaxBodyBytes is the default request body limit: far above any
// text prompt that fits a context window, low enough to stop a runaway
// upload.
const DefaultMaxBodyBytes = 32 << 20

// DefaultBodyReadTimeout is the default of Config.BodyReadTimeout.
const DefaultBodyReadTimeout = 30 * time.Second

// DefaultResponseWriteTimeout is the default of Config.ResponseWriteTimeout.
const DefaultResponseWriteTimeout = time.Minute

// DefaultMaxIdleConnsPerHost is the default idle-connection cap per engine
// of the Handler's own transport. The pool only ever holds as many
// connections as were in flight to an engine at once, so a cap above the
// offered concurrency costs nothing at low load and keeps a busy gateway
// from closing and redialing connections after every burst.
const DefaultMaxIdleConnsPerHost = 1024

// Config configures a Handler.
type Config struct {
	// Model is the base model name the engines serve. A request whose body
	// names another model is routed as a LoRA adapter of that name (with
	// ServerConfig.Models, as a model of its own unless an engine lists it
	// as an adapter; see models.go). Empty means the body's model is the
	// base model.
	Model string `json:"model"`
	// MaxBodyBytes limits the request body; a larger body is answered 413.
	// 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxBodyBytesInFlight bounds the bytes that the bodies of all requests
	// in flight hold together, from their first byte until their response
	// ends. Bodies are buffered as their bytes arrive, so a body holds what
	// it has sent (at most twice that), not what its Content-Length
	// announces. A body the model rewrite table changed
	// (ServerConfig.Models) holds its rewritten copy as well, charged when
	// it is made, as does a split request in exchange mode the copies its
	// exchange makes (the parsed members and the prefill body during the
	// prefill step, then the decode body, the body with the prefiller's
	// transfer parameters, whose room is reserved before the prefiller is
	// sent anything): a split whose copies find no room goes to the decode
	// endpoint as it came, for a local prefill (X-Kvroute-Prefill-Fallback
	// body_budget). A request whose body, or a copy it cannot go without,
	// finds no room is answered 503 with a Retry-After and counted as
	// result "body_budget".
	// With ObserveCachedTokens, the buffer that reads a response's usage (a
	// JSON body, or one line of a stream, at most 1 MiB) is charged too; a
	// response whose buffer finds no room is passed through unread (usage
	// result "no_room").
	// 0 means DefaultMaxBodyBytesInFlight (or MaxBodyBytes when that is
	// larger); a value below MaxBodyBytes is an error, since a body at the
	// limit could never pass.
	MaxBodyBytesInFlight int64 `json:"maxBodyBytesInFlight"`
	// BodyReadTimeout is the time a client has to send the whole request
	// body, counted from the end of its header; a body still incomplete then
	// is answered 408, its connection closed, and counted as result
	// "body_timeout". It stops clients that trickle a body to hold a
	// connection and its buffer. The default allows DefaultMaxBodyBytes at
	// about 1.1 MB/s. 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration `json:"bodyReadTimeout"`
	// ResponseWriteTimeout is the time each write of a proxied response
	// may wait for the client to take it. A client that stops reading (a
	// stalled connection, a stream it never drains) would otherwise keep
	// its request open for as long as it keeps the connection: its body's
	// share of MaxBodyBytesInFlight, which other clients' bodies then find
	// full, its engine request and its routing load. Past the timeout the
	// response is cut, the engine request cancelled, and the request
	// counted as result "client_stalled". The deadline restarts at every
	// write, so a slow stream that the client keeps reading is never cut.
	// 0 means DefaultResponseWriteTimeout.
	ResponseWriteTimeout time.Duration `json:"responseWriteTimeout"`
	// MaxIdleConnsPerHost caps the idle keep-alive connections the
	// Handler's own transport keeps per engine (unused with
	// Options.Transport). Size it at or above the peak concurrent requests
	// per engine; below that, connections are closed after a burst and
	// redialed in the next one. It also caps the transport's warm-ahead:
	// an engine whose last idle connection is taken is dialed up to the
	// gateway's peak of requests in flight, so that a request does not
	// wait for a dial at a concurrency the gateway has seen (unless the
	// engine closes idle connections itself). 0 means
	// DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int `json:"maxIdleConnsPerHost"`
	// ObserveCachedTokens reads the cached prompt tokens the engine reports
	// in each response's usage (vLLM started with
	// --enable-prompt-tokens-details) and ends the request with them
	// (kvroute.Decision.Done with DoneInfo.CachedTokens), closing the loop on
	// the index's accuracy.
	// Leave it off for engines that do not report them: a usage without the
	// details reads as 0 cached tokens. Streams carry usage only when the
	// client asked for stream_options.include_usage.
	ObserveCachedTokens bool `json:"observeCachedTokens"`
	// TokenizeOnce lists the APIs whose requests are forwarded with the
	// prompt the router rendered, as token IDs, instead of its text, so that
	// the engine does not tokenize it again (see tokenin.go). Only
	// render.APICompletions qualifies: on the other APIs the engine takes no
	// token-ID prompt with the same response, and New refuses them. A
	// request that was not rendered, or whose prompt is not text, or that
	// sets echo, is forwarded as it came. Empty, the default, forwards every
	// body unchanged.
	TokenizeOnce []render.API `json:"tokenizeOnce"`
	// AllowClientKVTransferParams forwards the kv_transfer_params member a
	// client's body carries. By default the gateway removes it (counted in
	// kvroute_gateway_client_transfer_params_removed_total): vLLM's KV
	// connectors act on it, and a client's do_remote_prefill with its own
	// remote_host would make the engine pull KV blocks from whatever
	// address the client names; the transfer parameters of a split request
	// are the gateway's (exchange mode) or the decode pod's sidecar's to
	// set. Set it only behind a trusted component that disaggregates
	// itself and sends kvroute requests with transfer parameters already
	// set.
	AllowClientKVTransferParams bool `json:"allowClientKVTransferParams"`
	// CORSAllowedOrigins lists the origins ("scheme://host[:port]", or "*"
	// for any) whose browsers may read the answers the gateway writes
	// itself (its 400, 404, 405, 408, 413, 429, 502 and 503): set it to
	// the engines' --allowed-origins, so that a browser client refused by
	// the gateway reads why, as it reads the engine's own errors, instead
	// of a network error. Responses from an engine keep exactly the
	// engine's CORS headers and preflights are answered by the engine, so
	// the gateway grants nothing the engine's policy refuses. Empty, the
	// default: the gateway's own answers carry no CORS headers.
	CORSAllowedOrigins []string `json:"corsAllowedOrigins"`
	// CORSAllowCredentials is the engines' --allow-credentials for the
	// gateway's own answers (Access-Control-Allow-Credentials: true, the
	// origin echoed even under "*"). It needs CORSAllowedOrigins.
	CORSAllowCredentials bool `json:"corsAllowCredentials"`
}

// Validate reports the first setting of c that New would refuse on its
// own, with New's error naming its key: a negative size or timeout, a
// TokenizeOnce API that does not qualify, a CORSAllowedOrigins entry that
// is not an origin, CORSAllowCredentials without origins. A configuration
// loader calls it when the file is read, so that a mistake is reported
// there rather than when the gateway starts. The one check that spans two
// keys, MaxBodyBytesInFlight against MaxBodyBytes, is New's alone: the
// gateway's --max-body-bytes may still change the latter.
func (c Config) Validate() error {
	for _, f := range []struct {
		key string
		v   int64
		s   string
	}{
		{"maxBodyBytes", c.MaxBodyBytes, fmt.Sprint(c.MaxBodyBytes)},
		{"maxBodyBytesInFlight", c.MaxBodyBytesInFlight, fmt.Sprint(c.MaxBodyBytesInFlight)},
		{"bodyReadTimeout", int64(c.BodyReadTimeout), c.BodyReadTimeout.String()},
		{"responseWriteTimeout", int64(c.ResponseWriteTimeout), c.ResponseWriteTimeout.String()},
		{"maxIdleConnsPerHost", int64(c.MaxIdleConnsPerHost), fmt.Sprint(c.MaxIdleConnsPerHost)},
	} {
		if f.v < 0 {
			return fmt.Errorf("gateway: %s %s is negative", f.key, f.s)
		}
	}
	if _, err := tokenInAPIs(c.TokenizeOnce); err != nil {
		return err
	}
	_, err := newCORSPolicy(c.CORSAllowedOrigins, c.CORSAllowCredentials)
	return err
}

// Options are the injected dependencies of a Handler or a Server; the zero
// value is valid.
type Options struct {
	// Set is the gateway's observability (see package telemetry):
	//   Registerer receives the gateway's metrics; nil registers nothing
	//   (NewServer requires nil: it serves its own registry).
	//   Logger receives the gateway's logs; nil discards them.
	//   TracerProvider traces each inference request as a server span that
	//   joins the client's W3C trace context (traceparent) and is propagated
	//   to the engine; the Router's spans nest under it when the Router has
	//   the same provider. nil traces nothing (the client's traceparent is
	//   still passed on unchanged).
	//   Clock is the clock of the latency metrics (pick and first chunk)
	//   and, for NewServer, the Router's clock too (speculative expiry, the
	//   request table's expiry, the event streams' timers); nil is the wall
	//   clock. The body read timeout and the upstream connections' idle
	//   limit stay wall time: they are socket deadlines and the engines'
	//   keep-alive timers.
	telemetry.Set
	// Transport carries the upstream requests; nil uses the Handler's own
	// HTTP/1.1 keep-alive client (plain HTTP to the engines; other schemes
	// through a dedicated http.Transport), without HTTP/2 and without
	// transparent compression.
	Transport http.RoundTripper
}
