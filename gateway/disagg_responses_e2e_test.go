package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine/server"
)

// With the profile's splitAPIs naming responses, a long new Responses
// request through the gateway is split in both modes (header: the decode
// pod's kvroute-sidecar runs the exchange; exchange: the gateway does):
// the prefill engine, a simulated vLLM whose Responses API reads
// kv_transfer_params, computes the prompt and generates one token asked
// for with max_output_tokens, and the decode engine receives every block
// and generates the client's max_output_tokens, streamed or not. A
// Messages request, which the list does not name, stays local, counted
// with reason api. Before, Responses requests always stayed local, and
// neither the sidecar nor the exchange split /v1/responses.
func TestDisaggResponsesThroughGateway(t *testing.T) {
	for _, mode := range pdModes {
		t.Run(mode, func(t *testing.T) {
			defer leakcheck.Check(t)()
			pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
			dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, mode == DisaggModeHeader, 0)
			defer func() {
				pre.close(t)
				dec.close(t)
			}()
			eps := []kvroute.Endpoint{pre.endpoint(disagg.RolePrefill), dec.endpoint(disagg.RoleDecode)}
			dcfg := disagg.Config{NonCachedTokens: 256, SplitAPIs: []render.API{render.APICompletions, render.APIChatCompletions, render.APIResponses}}
			f := startPDFleetWith(t, dcfg, mode, 0, eps, pre, dec)
			defer f.close(t)

			for i, stream := range []bool{false, true} {
				body := fmt.Sprintf(`{"model":%q,"input":%q,"max_output_tokens":5,"stream":%t}`, testModel, words(60+i, 600), stream)
				resp, err := f.client.Post(f.gw.URL()+"/v1/responses", "application/json", strings.NewReader(body))
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
				require.Equal(t, dec.id, resp.Header.Get(HeaderEndpoint))
				require.Equal(t, pre.id, resp.Header.Get(HeaderPrefillEndpoint), "split (stream %t)", stream)
				require.Empty(t, resp.Header.Get(HeaderPrefillFallback), string(b))
				require.Equal(t, uint64(i+1), pre.srv.Engine().Stats().GenerationTokens, "the prefiller generated one token per request")
				if stream {
					require.Equal(t, 5, strings.Count(string(b), "event: response.output_text.delta"), string(b))
					continue
				}
				var a struct {
					Usage struct {
						Input   int `json:"input_tokens"`
						Output  int `json:"output_tokens"`
						Details struct {
							Cached int `json:"cached_tokens"`
						} `json:"input_tokens_details"`
					} `json:"usage"`
				}
				require.NoError(t, json.Unmarshal(b, &a))
				require.Equal(t, 5, a.Usage.Output)
				require.Equal(t, a.Usage.Input-1, a.Usage.Details.Cached, "the decoder received the whole prompt")
			}

			body := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":%q}]}`, testModel, words(70, 600))
			resp, err := f.client.Post(f.gw.URL()+"/v1/messages", "application/json", strings.NewReader(body))
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, resp.Header.Get(HeaderPrefillEndpoint), "messages are not in splitAPIs")

			f.requireIdle(t, eps)
			require.Equal(t, 2.0, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
			require.Equal(t, 1.0, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "local", "reason", "api"))
			require.Equal(t, 2.0, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeSplit))
			require.Zero(t, f.sidecarCounter(t, "kvroute_sidecar_requests_total", "outcome", sidecar.OutcomeFallback))
		})
	}
}
