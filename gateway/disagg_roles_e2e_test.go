package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
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

var pdModes = []string{DisaggModeHeader, DisaggModeExchange}

// Through the gateway, two prefill-role and two decode-role simulated
// engines with real KV transfer, in both modes (header: kvroute-sidecar
// handlers in front of the decode engines run the exchange; exchange: the
// gateway runs it): a long new prompt is split (the prefill engine
// computes it, generates its one token, the decoder reads every block and
// computes only the last token); the follow-up turn, whose prefix the
// decoder now holds (its BlockStored events for the received blocks), is
// not split; the prefill engine holding a document is preferred for it;
// the prefill role's load ends at its one token; every decision is
// released once; the metrics count by role, outcome, and exchange outcome.
func TestDisaggRolesThroughGateway(t *testing.T) {
	for _, mode := range pdModes {
		t.Run(mode, func(t *testing.T) {
			defer leakcheck.Check(t)()
			header := mode == DisaggModeHeader
			pre := []*roleEngine{startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0),
				startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)}
			dec := []*roleEngine{startRoleEngine(t, server.RoleDecode, server.PDConfig{}, header, 0),
				startRoleEngine(t, server.RoleDecode, server.PDConfig{}, header, 0)}
			all := append(append([]*roleEngine(nil), pre...), dec...)
			defer func() {
				for _, e := range all {
					e.close(t)
				}
			}()
			eps := []kvroute.Endpoint{pre[0].endpoint(disagg.RolePrefill), pre[1].endpoint(disagg.RolePrefill),
				dec[0].endpoint(disagg.RoleDecode), dec[1].endpoint(disagg.RoleDecode)}
			f := startPDFleet(t, mode, 0, eps, all...)
			defer f.close(t)
			r := f.gw.Router()

			// 1. A long new prompt is split: the prefill engine computes it
			// and answers one token, the decode engine receives every block
			// but the last token's. Streamed: once the first chunk is out,
			// the prefill endpoint carries no load.
			turn1 := words(1, 600)
			body, err := json.Marshal(map[string]any{"model": testModel, "max_tokens": 8, "prompt": turn1, "stream": true,
				"stream_options": map[string]any{"include_usage": true}})
			require.NoError(t, err)
			resp, err := f.client.Post(f.gw.URL()+"/v1/completions", "application/json", strings.NewReader(string(body)))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			d1, p1 := resp.Header.Get(HeaderEndpoint), resp.Header.Get(HeaderPrefillEndpoint)
			require.Contains(t, []string{eps[2].ID, eps[3].ID}, d1, "a decode engine")
			require.Contains(t, []string{eps[0].ID, eps[1].ID}, p1, "a prefill engine")
			require.Empty(t, resp.Header.Get(HeaderPrefillFallback))
			br := bufio.NewReader(resp.Body)
			_, err = br.ReadString('\n')
			require.NoError(t, err)
			tok, n, _ := r.Load().Load(p1)
			require.Equal(t, [2]int64{0, 0}, [2]int64{tok, n}, "the prefiller's part ended at its one token")
			rest, err := io.ReadAll(br)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Contains(t, string(rest), `"cached_tokens"`)
			require.Equal(t, uint64(1), f.engines[p1].srv.Engine().Stats().GenerationTokens, "the prefiller generated one token")
			transferred := f.engines[d1].srv.Engine().Stats().KVTransferTokens
			require.Positive(t, transferred, "the decoder read the prompt's KV")

			// 2. The follow-up turn, whose prefix the decode engine holds,
			// is prefilled there: not split, no prefill request.
			prefills := pre[0].srv.Engine().Stats().RequestSuccess + pre[1].srv.Engine().Stats().RequestSuccess
			a := f.post(t, f.gw.URL(), turn1+words(2, 20))
			require.Equal(t, d1, a.decode)
			require.Empty(t, a.prefill, "not split")
			require.Greater(t, a.cached, a.prompt/2, "the decoder's cache served the first turn")
			require.Equal(t, prefills, pre[0].srv.Engine().Stats().RequestSuccess+pre[1].srv.Engine().Stats().RequestSuccess)
			require.Equal(t, transferred, f.engines[d1].srv.Engine().Stats().KVTransferTokens, "nothing transferred")

			// 3. A document one prefill engine holds (it served it, and its
			// events say so) is prefilled there.
			doc := words(3, 800)
			holder := pre[1].endpoint(disagg.RolePrefill)
			if p1 == holder.ID {
				holder = pre[0].endpoint(disagg.RolePrefill)
			}
			f.post(t, "http://"+holder.ID, doc)
			waitFor(t, "the prefill engine's events indexed", func() bool {
				s, err := r.Match(t.Context(), &kvroute.Request{API: render.APICompletions,
					Body: []byte(`{"model":"` + testModel + `","prompt":"` + doc + `"}`)}, []kvroute.Endpoint{holder})
				require.NoError(t, err)
				defer s.Release()
				return s.Candidate(0).Match.Blocks > 0
			})
			a = f.post(t, f.gw.URL(), doc+words(4, 300))
			require.Equal(t, holder.ID, a.prefill, "the prefill engine holding the document")
			require.Equal(t, a.prompt-1, a.cached, "the decoder received the whole prompt")

			f.requireIdle(t, eps)
			require.Equal(t, 2.0, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
			require.Equal(t, 1.0, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "local", "reason", "cached"))
			require.Equal(t, 3.0, pdCounter(t, f.gw, "kvroute_disagg_picks_total", "role", disagg.RoleDecode))
			require.Equal(t, 2.0, pdCounter(t, f.gw, "kvroute_disagg_picks_total", "role", disagg.RolePrefill))
			require.Zero(t, pdCounter(t, f.gw, "kvroute_disagg_decode_without_events_total"))
			require.Equal(t, 1.0, pdCounter(t, f.gw, "kvroute_gateway_usage_total", "result", "observed"),
				"only the local turn's cached tokens feed the accuracy loop: a split one's count the transfer")
			require.Equal(t, 2.0, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeSplit))
			require.Zero(t, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeFallback))
			if header {
				// The follow-up turn went through the decode pod's sidecar as
				// it came (besides whatever else reaches the pod there).
				require.GreaterOrEqual(t, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomePlain), 1.0)
			} else {
				require.Zero(t, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomePlain), "the gateway runs the exchange on split requests only")
			}
		})
	}
}

// The failure paths, in both modes: a prefiller that is unreachable or
// does not answer within the prefill deadline makes the decode engine
// prefill locally (the request completes, the fallback is counted by
// reason, and in exchange mode the response says why); a transfer that
// fails at the decoder (the prefiller's blocks expired before the read) is
// counted by the decode engine, which recomputes, and the request
// completes. Every decision is released once either way.
func TestDisaggFailuresThroughGateway(t *testing.T) {
	for _, mode := range pdModes {
		t.Run(mode, func(t *testing.T) {
			defer leakcheck.Check(t)()
			header := mode == DisaggModeHeader
			// The prefill deadline: the slow prefiller's case lasts this long;
			// the real prefill of the third case must end within it.
			const deadline = 2 * time.Second
			dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, header, deadline)
			expiring := startRoleEngine(t, server.RolePrefill, server.PDConfig{LeaseTTL: time.Nanosecond}, false, 0)
			defer dec.close(t)
			defer expiring.close(t)
			release := make(chan struct{})
			slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client hanging up
				select {                           // answers only after the prefill deadline (or the test ended)
				case <-r.Context().Done():
				case <-release:
				}
			})}
			sln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			slowDone := make(chan error, 1)
			go func() { slowDone <- slow.Serve(sln) }()
			defer func() {
				close(release)
				require.NoError(t, slow.Close())
				require.ErrorIs(t, <-slowDone, http.ErrServerClosed)
			}()
			dl, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			dead := dl.Addr().String()
			require.NoError(t, dl.Close())

			decEP := dec.endpoint(disagg.RoleDecode)
			eps := []kvroute.Endpoint{decEP, expiring.endpoint(disagg.RolePrefill)}
			f := startPDFleet(t, mode, deadline, eps, dec, expiring)
			defer f.close(t)
			cases := []struct {
				prefill kvroute.Endpoint
				reason  string // "" for a split whose transfer fails
			}{
				{kvroute.Endpoint{ID: dead, Role: disagg.RolePrefill}, sidecar.ReasonUnreachable},
				{kvroute.Endpoint{ID: sln.Addr().String(), Role: disagg.RolePrefill}, sidecar.ReasonTimeout},
				{expiring.endpoint(disagg.RolePrefill), ""},
			}
			for i, c := range cases {
				cur := []kvroute.Endpoint{decEP, c.prefill}
				require.NoError(t, f.gw.SetEndpoints(cur))
				a := f.post(t, f.gw.URL(), words(10+i, 600))
				require.Equal(t, decEP.ID, a.decode, c.reason)
				require.Less(t, a.cached, a.prompt/2, "%s: the decoder computed the prompt itself", c.reason)
				if c.reason == "" || header {
					require.Equal(t, c.prefill.ID, a.prefill)
					require.Empty(t, a.fallback)
				} else {
					require.Empty(t, a.prefill, "the prefill step failed")
					require.Equal(t, c.reason, a.fallback)
				}
				f.requireIdle(t, cur)
			}
			for _, r := range sidecar.Reasons {
				want := 0.0
				if r == sidecar.ReasonUnreachable || r == sidecar.ReasonTimeout {
					want = 1
				}
				require.Equal(t, want, f.sidecarCounter(t, "kvroute_sidecar_prefill_fallbacks_total", "reason", r), r)
			}
			require.Equal(t, 2.0, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeFallback))
			require.Equal(t, 1.0, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeSplit))
			require.Equal(t, 1.0, regCounter(t, dec.srv.Registry(), "simengine_kv_transfer_failures_total", "reason", "expired"))
			require.Equal(t, 1.0, regCounter(t, dec.srv.Registry(), "simengine_kv_transfers_total", "outcome", "recompute"))
			require.Equal(t, 3.0, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
		})
	}
}

// A decode engine under kv_load_failure_policy "fail" answers 500 when its
// KV transfer fails; in exchange mode the gateway sends the request to it
// once more without the transfer parameters, the engine prefills locally,
// and the client gets its completion. The retry is counted and named in
// the response; the decision is released once.
func TestDisaggDecodeFailureRetriedInExchangeMode(t *testing.T) {
	defer leakcheck.Check(t)()
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{KVLoadFailurePolicy: server.PolicyFail}, false, 0)
	expiring := startRoleEngine(t, server.RolePrefill, server.PDConfig{LeaseTTL: time.Nanosecond}, false, 0)
	defer dec.close(t)
	defer expiring.close(t)
	eps := []kvroute.Endpoint{dec.endpoint(disagg.RoleDecode), expiring.endpoint(disagg.RolePrefill)}
	f := startPDFleet(t, DisaggModeExchange, 0, eps, dec, expiring)
	defer f.close(t)

	a := f.post(t, f.gw.URL(), words(20, 600))
	require.Equal(t, eps[0].ID, a.decode)
	require.Equal(t, eps[1].ID, a.prefill, "the prefill step ran")
	require.Equal(t, FallbackDecodeFailed, a.fallback)
	require.Less(t, a.cached, a.prompt/2, "the decoder computed the prompt itself")
	f.requireIdle(t, eps)
	require.Equal(t, 1.0, pdCounter(t, f.gw, "kvroute_gateway_disagg_decode_retries_total"))
	require.Equal(t, 1.0, regCounter(t, dec.srv.Registry(), "simengine_kv_transfers_total", "outcome", "fail"))
	require.Equal(t, 1.0, regCounter(t, dec.srv.Registry(), "simengine_kv_transfer_failures_total", "reason", "expired"))
	require.Equal(t, 1.0, pdCounter(t, f.gw, "kvroute_gateway_requests_total", "api", "completions", "result", "success"))
}
