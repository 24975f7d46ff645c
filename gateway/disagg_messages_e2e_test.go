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
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine/server"
)

// With the profile's splitAPIs naming messages, a long new Messages
// request through the gateway is split in both modes (header: the decode
// pod's kvroute-sidecar runs the exchange; exchange: the gateway does), as
// llm-d's newer sidecar splits /v1/messages: the prefill engine, a
// simulated vLLM whose Messages API reads and answers kv_transfer_params
// as vLLM's does, computes the prompt and generates one token asked for
// with max_tokens, and the decode engine receives every block and
// generates the client's max_tokens, streamed or not. Before, neither the
// sidecar nor the exchange split /v1/messages, and exchange mode refused
// messages in splitAPIs.
func TestDisaggMessagesThroughGateway(t *testing.T) {
	for _, mode := range pdModes {
		t.Run(mode, func(t *testing.T) {
			defer leakcheck.Check(t)()
			p := startSplitPair(t, mode, render.APIMessages)
			defer p.close(t)

			var transferred uint64
			for i, stream := range []bool{false, true} {
				body := fmt.Sprintf(`{"model":%q,"max_tokens":5,"stream":%t,"system":"be brief","messages":[{"role":"user","content":%q}]}`,
					testModel, stream, words(80+i, 600))
				b := p.postSplit(t, "/v1/messages", body, map[string]string{"anthropic-version": "2023-06-01"}, i+1, stream)
				require.NotContains(t, b, "kv_transfer_params", "the client sees the decoder's answer")
				got := p.dec.srv.Engine().Stats().KVTransferTokens - transferred
				transferred += got
				if stream {
					require.Equal(t, 5, strings.Count(b, "event: content_block_delta"), b)
					require.Contains(t, b, "event: message_stop")
					require.Positive(t, got, "the decoder received the prompt")
					continue
				}
				var a struct {
					Type  string `json:"type"`
					Usage struct {
						Input  int `json:"input_tokens"`
						Output int `json:"output_tokens"`
					} `json:"usage"`
				}
				require.NoError(t, json.Unmarshal([]byte(b), &a))
				require.Equal(t, "message", a.Type)
				require.Equal(t, 5, a.Usage.Output)
				require.Equal(t, uint64(a.Usage.Input-1), got, "the decoder received the whole prompt")
			}

			p.requireCounted(t, 2, 0)
		})
	}
}

// A long new Messages request forcing a named tool stays local (reason
// forced_tool) when its body comes UTF-16 or UTF-32, as when it comes
// UTF-8: the profile reads the body the gateway hands it, already decoded
// as vLLM decodes it (jsonBody), and decodes nothing again. The prefiller
// is not asked for a token; the decoder streams the answer.
func TestDisaggWideForcedToolStaysLocal(t *testing.T) {
	defer leakcheck.Check(t)()
	pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, false, 0)
	defer func() {
		pre.close(t)
		dec.close(t)
	}()
	eps := []kvroute.Endpoint{pre.endpoint(disagg.RolePrefill), dec.endpoint(disagg.RoleDecode)}
	dcfg := disagg.Config{NonCachedTokens: 256, SplitAPIs: []render.API{render.APIMessages}}
	f := startPDFleetWith(t, dcfg, DisaggModeExchange, 0, eps, pre, dec)
	defer f.close(t)

	for i, enc := range []struct {
		unit     int
		big, bom bool
	}{{2, false, true}, {2, true, false}, {4, false, false}, {4, true, true}} {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":3,"stream":true,"tools":[{"name":"get","input_schema":{"type":"object"}}],`+
			`"tool_choice":{"type":"tool","name":"get"},"messages":[{"role":"user","content":%q}]}`, testModel, words(200+i, 600))
		resp, b := f.postMessages(t, wideBody(body, enc.unit, enc.big, enc.bom))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%+v: %s", enc, b)
		require.Equal(t, dec.id, resp.Header.Get(HeaderEndpoint))
		require.Empty(t, resp.Header.Get(HeaderPrefillEndpoint), "%+v: not split", enc)
		require.Contains(t, string(b), "event: message_stop")
	}
	f.requireIdle(t, eps)
	require.Equal(t, 4.0, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "local", "reason", "forced_tool"))
	require.Zero(t, pdCounter(t, f.gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
	require.Zero(t, pre.srv.Engine().Stats().GenerationTokens, "the prefiller was asked for nothing")
}

// postMessages posts a Messages request body to the gateway and returns
// the response with its body read.
func (f *pdFleet) postMessages(t *testing.T, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.gw.URL()+"/v1/messages", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, b
}
