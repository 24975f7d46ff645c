package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
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
			p := startSplitPair(t, mode, render.APIResponses)
			defer p.close(t)

			for i, stream := range []bool{false, true} {
				body := fmt.Sprintf(`{"model":%q,"input":%q,"max_output_tokens":5,"stream":%t}`, testModel, words(60+i, 600), stream)
				b := p.postSplit(t, "/v1/responses", body, nil, i+1, stream)
				if stream {
					require.Equal(t, 5, strings.Count(b, "event: response.output_text.delta"), b)
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
				require.NoError(t, json.Unmarshal([]byte(b), &a))
				require.Equal(t, 5, a.Usage.Output)
				require.Equal(t, a.Usage.Input-1, a.Usage.Details.Cached, "the decoder received the whole prompt")
			}

			body := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":%q}]}`, testModel, words(70, 600))
			resp, err := p.client.Post(p.gw.URL()+"/v1/messages", "application/json", strings.NewReader(body))
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, resp.Header.Get(HeaderPrefillEndpoint), "messages are not in splitAPIs")

			p.requireCounted(t, 2, 1)
		})
	}
}
