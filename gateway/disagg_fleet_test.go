package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// roleEngine is a simulated vLLM with a P/D role (real KV connector
// behaviour: a prefill engine holds the blocks and answers transfer
// parameters, a decode engine reads them over loopback HTTP) and KV
// events, serving on its own listener. In header mode a decode engine has
// a kvroute-sidecar handler in front of it, whose address is the
// endpoint's ID.
type roleEngine struct {
	srv    *server.Server
	id     string // the endpoint ID: the engine's address, or its sidecar's
	served chan error

	sidecar *sidecar.Handler // header mode, decode role
	sreg    *prometheus.Registry
	shs     *http.Server
	sdone   chan error
}

// startRoleEngine starts an engine with role and pd; withSidecar puts a
// sidecar in front of it (its ID is then the sidecar's address) with
// prefill deadline timeout (0: the default).
func startRoleEngine(t *testing.T, role string, pd server.PDConfig, withSidecar bool, timeout time.Duration) *roleEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &roleEngine{id: ln.Addr().String(), served: make(chan error, 1)}
	var sln net.Listener
	if withSidecar {
		sln, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		e.id = sln.Addr().String()
	}
	pd.Role = role
	if pd.TransferTimePerToken == 0 {
		pd.TransferTimePerToken = time.Microsecond
	}
	replay := "tcp://127.0.0.1:0"
	e.srv, err = server.New(server.Config{Model: testModel, EnableScaleOut: true, PD: pd,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 4096, PrefillTokensPerSecond: 1e7, DecodeStep: 50 * time.Microsecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &replay, Topic: "kv@" + e.id + "@" + testModel},
	}, server.Options{})
	require.NoError(t, err)
	go func() { e.served <- e.srv.Serve(ln) }()
	if withSidecar {
		e.sreg = prometheus.NewRegistry()
		e.sidecar, err = sidecar.NewHandler(sidecar.Config{DecoderURL: "http://" + ln.Addr().String(), PrefillTimeout: timeout},
			sidecar.Options{Set: telemetry.Set{Registerer: e.sreg}})
		require.NoError(t, err)
		e.shs = &http.Server{Handler: e.sidecar}
		e.sdone = make(chan error, 1)
		go func() { e.sdone <- e.shs.Serve(sln) }()
	}
	return e
}

func (e *roleEngine) endpoint(role string) kvroute.Endpoint {
	return kvroute.Endpoint{ID: e.id, Role: role, EventsAddress: e.srv.KVEventsEndpoint(), ReplayAddress: e.srv.ReplayEndpoint()}
}

func (e *roleEngine) close(t *testing.T) {
	if e.shs != nil {
		require.NoError(t, e.shs.Close())
		require.ErrorIs(t, <-e.sdone, http.ErrServerClosed)
		e.sidecar.Close()
	}
	require.NoError(t, e.srv.Close())
	require.NoError(t, <-e.served)
}

// pdFleet is a gateway in a P/D mode over role engines.
type pdFleet struct {
	gw      *Server
	client  *http.Client
	engines map[string]*roleEngine // by endpoint ID
}

// startPDFleet starts a gateway in mode over eps, whose engines are given;
// timeout is the exchange mode's prefill deadline (0: the default).
func startPDFleet(t *testing.T, mode string, timeout time.Duration, eps []kvroute.Endpoint, engines ...*roleEngine) *pdFleet {
	t.Helper()
	return startPDFleetWith(t, disagg.Config{NonCachedTokens: 256}, mode, timeout, eps, engines...)
}

// startPDFleetWith is startPDFleet with the profile's configuration dcfg.
func startPDFleetWith(t *testing.T, dcfg disagg.Config, mode string, timeout time.Duration, eps []kvroute.Endpoint, engines ...*roleEngine) *pdFleet {
	t.Helper()
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(true)
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
		Proxy:      Config{ObserveCachedTokens: true},
		Disagg:     &dcfg,
		DisaggHost: DisaggHostConfig{Mode: mode, Exchange: sidecar.Config{PrefillTimeout: timeout}}}, Options{})
	require.NoError(t, err)
	f := &pdFleet{gw: gw, client: &http.Client{}, engines: map[string]*roleEngine{}}
	for _, e := range engines {
		f.engines[e.id] = e
	}
	waitFor(t, "every engine's KV-event stream live", func() bool {
		for _, e := range engines {
			st, ok := gw.Router().Events().Status(e.id)
			if !ok || st.State != kvevents.StateLive || e.srv.Publisher().Stats().Subscribed == 0 {
				return false
			}
		}
		return true
	})
	return f
}

func (f *pdFleet) close(t *testing.T) {
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
}

// pdAnswer is what a test reads of a completion.
type pdAnswer struct {
	decode, prefill, fallback string // the gateway's debugging headers
	prompt, cached            int    // the decoder's usage
}

// post sends a non-streamed completion of prompt to base and checks it
// succeeded.
func (f *pdFleet) post(t *testing.T, base, prompt string) pdAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": testModel, "max_tokens": 2, "prompt": prompt})
	require.NoError(t, err)
	resp, err := f.client.Post(base+"/v1/completions", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var u struct {
		Usage struct {
			Prompt  int `json:"prompt_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &u))
	return pdAnswer{decode: resp.Header.Get(HeaderEndpoint), prefill: resp.Header.Get(HeaderPrefillEndpoint),
		fallback: resp.Header.Get(HeaderPrefillFallback), prompt: u.Usage.Prompt, cached: u.Usage.Details.Cached}
}

// requireIdle waits until every request has ended and checks that nothing
// stays accounted or filed: each Decision, prefill role included, was
// released.
func (f *pdFleet) requireIdle(t *testing.T, eps []kvroute.Endpoint) {
	t.Helper()
	r := f.gw.Router()
	waitFor(t, "every request ended", func() bool {
		for _, e := range eps {
			if tok, n, _ := r.Load().Load(e.ID); tok != 0 || n != 0 {
				return false
			}
		}
		return r.Requests().Len() == 0
	})
}

// sidecarCounter sums a kvroute_sidecar_* counter over where the
// exchange runs: the gateway (exchange mode) or the decode pods' sidecars.
func (f *pdFleet) sidecarCounter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	n := pdCounter(t, f.gw, name, labels...)
	for _, e := range f.engines {
		if e.sreg != nil {
			n += regCounter(t, e.sreg, name, labels...)
		}
	}
	return n
}

// regCounter returns the value of the counter name in reg with the label
// pairs given (0 when absent).
func regCounter(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if pdMatches(m, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// pdMatches reports whether m carries every label pair in labels (name,
// value, name, value, ...).
func pdMatches(m *dto.Metric, labels []string) bool {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// pdModes are where the exchange of a split request runs: the decode
// pods' kvroute-sidecars (header) or the gateway (exchange).
var pdModes = []string{DisaggModeHeader, DisaggModeExchange}

// splitPair is a gateway in a P/D mode over one prefill and one decode role
// engine, whose profile splits one API on top of the completions APIs: the
// setup of the tests that a split request of that API runs end to end.
type splitPair struct {
	*pdFleet
	pre, dec *roleEngine
	eps      []kvroute.Endpoint
}

// startSplitPair starts the engines (the decoder behind a kvroute-sidecar
// in header mode) and a gateway in mode with splitAPIs completions, chat
// completions and api, and waits for both engines' KV-event streams.
func startSplitPair(t *testing.T, mode string, api render.API) *splitPair {
	t.Helper()
	pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, mode == DisaggModeHeader, 0)
	started := false
	defer func() {
		if !started { // the gateway failed to start: the engines stop here
			pre.close(t)
			dec.close(t)
		}
	}()
	eps := []kvroute.Endpoint{pre.endpoint(disagg.RolePrefill), dec.endpoint(disagg.RoleDecode)}
	dcfg := disagg.Config{NonCachedTokens: 256, SplitAPIs: []render.API{render.APICompletions, render.APIChatCompletions, api}}
	p := &splitPair{pdFleet: startPDFleetWith(t, dcfg, mode, 0, eps, pre, dec), pre: pre, dec: dec, eps: eps}
	started = true
	return p
}

// close shuts the gateway down, then the engines (each even when the one
// before failed).
func (p *splitPair) close(t *testing.T) {
	defer p.dec.close(t)
	defer p.pre.close(t)
	p.pdFleet.close(t)
}

// postSplit sends body to the gateway's path with the headers hdr (and
// Content-Type application/json) and checks the request was split: answered
// 200 by the decode engine, prefilled on the prefill engine without a
// fallback, which has generated one token for each of the n split requests
// so far. It returns the answer.
func (p *splitPair) postSplit(t *testing.T, path, body string, hdr map[string]string, n int, stream bool) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.gw.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Equal(t, p.dec.id, resp.Header.Get(HeaderEndpoint))
	require.Equal(t, p.pre.id, resp.Header.Get(HeaderPrefillEndpoint), "split (stream %t)", stream)
	require.Empty(t, resp.Header.Get(HeaderPrefillFallback), string(b))
	require.Equal(t, uint64(n), p.pre.srv.Engine().Stats().GenerationTokens, "the prefiller generated one token per request")
	return string(b)
}

// requireCounted waits until every request has ended and checks the
// gateway's decisions (split for an uncached prompt, local for an API
// splitAPIs does not name) and that the exchange, wherever it ran, split
// every split request without a fallback.
func (p *splitPair) requireCounted(t *testing.T, split, localAPI float64) {
	t.Helper()
	p.requireIdle(t, p.eps)
	require.Equal(t, split, pdCounter(t, p.gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
	require.Equal(t, localAPI, pdCounter(t, p.gw, "kvroute_disagg_decisions_total", "outcome", "local", "reason", "api"))
	require.Equal(t, split, p.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeSplit))
	require.Zero(t, p.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeFallback))
}
