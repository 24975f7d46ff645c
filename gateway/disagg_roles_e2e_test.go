package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine/server"
)

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
			dead := testport.Addr(t) // nothing listens, nor takes it meanwhile

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
