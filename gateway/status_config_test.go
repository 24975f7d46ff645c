package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/session"
)

// Every credential-like value is redacted wherever it sits (a field named
// like one, a map key named like one, the password of a URL), while counts
// of tokens and other settings stay readable.
func TestConfigTextRedactsCredentials(t *testing.T) {
	cfg := kvroute.DefaultConfig()
	cfg.Cluster.Password = "redis-secret-1"
	cfg.Cluster.Username = "kvroute"
	cfg.Bootstrap.Token = "bootstrap-secret-2"
	cfg.Bootstrap.Peers = []string{"http://peer:pw-secret-3@10.0.0.1:9090/snap"}
	cfg.Render.URL = "http://renderer:8000"
	v := struct {
		Router  kvroute.Config    `json:"router"`
		Headers map[string]string `json:"headers"`
		APIKey  string            `json:"apiKey"`
		Secrets struct {
			ClientSecret string `json:"clientSecret"`
			Empty        string `json:"password"`
		} `json:"secrets"`
		Broken string `json:"broken"`
	}{Router: cfg, Headers: map[string]string{"Authorization": "Bearer secret-4", "X-Trace": "on"}, APIKey: "secret-5",
		Broken: "redis://:secret-6@[bad"}
	v.Secrets.ClientSecret = "secret-7"
	text := configText(v)
	for _, s := range []string{"redis-secret-1", "bootstrap-secret-2", "pw-secret-3", "secret-4", "secret-5", "secret-6", "secret-7"} {
		require.NotContains(t, text, s)
	}
	for _, want := range []string{
		"router.cluster.password: [redacted]\n",
		"router.cluster.username: \"kvroute\"\n",
		"router.bootstrap.token: [redacted]\n",
		`router.bootstrap.peers[0]: "http://peer:[redacted]@10.0.0.1:9090/snap"` + "\n",
		"headers.Authorization: [redacted]\n",
		"headers.X-Trace: \"on\"\n",
		"apiKey: [redacted]\n",
		"secrets.clientSecret: [redacted]\n",
		"secrets.password: \"\"\n", // unset: nothing to hide, and it shows it is unset
		"broken: \"redis://[redacted]@[bad\"\n",
		"router.queueThresholdTokens: 4194304\n",
		"router.render.url: \"http://renderer:8000\"\n",
		"router.speculative.ttl: 2s\n",
	} {
		require.Contains(t, text, want)
	}
}

// The share history is a fixed ring: one sample per 10 s bucket with
// requests, the oldest dropped beyond 90, and a clock stepping back adds to
// the latest bucket.
func TestShareHistoryIsBounded(t *testing.T) {
	var h shareHistory
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.add(t0, 100, 50, 40)
	h.add(t0.Add(time.Second), 100, 50, 60)
	h.add(t0.Add(-time.Minute), 100, 0, 0) // stepped back: same bucket
	h.add(t0, 0, 0, 0)                     // no prompt tokens: no share
	s := h.samples()
	require.Len(t, s, 1)
	require.Equal(t, shareSample{Start: t0, Prompt: 300, Predicted: 100, Actual: 100, Requests: 3}, s[0])
	for i := 1; i <= 2*historyBuckets; i++ {
		h.add(t0.Add(time.Duration(i)*historyBucket), 10, 1, 2)
	}
	s = h.samples()
	require.Len(t, s, historyBuckets)
	require.Equal(t, t0.Add((historyBuckets+1)*historyBucket), s[0].Start)
	require.Equal(t, t0.Add(2*historyBuckets*historyBucket), s[len(s)-1].Start)
	chart := string(shareChart(s, s[len(s)-1].Start))
	require.Equal(t, historyBuckets, strings.Count(chart, `<circle class="predicted"`))
	require.Contains(t, chart, `cx="590.0"`, "the latest bucket is at the right edge")
}

// A request that comes without X-Request-Id gets an ID from the gateway,
// which the engine receives (vLLM names its request by it) and the status
// page shows; a client's ID is passed on as it came.
func TestGatewayGivesRequestsWithoutIDOne(t *testing.T) {
	h := newHarness(t, 1, Config{})
	defer h.close()
	resp := h.post("/v1/completions", completionsBody("hello", false))
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/completions", strings.NewReader(completionsBody("hello", false)))
	require.NoError(t, err)
	req.Header.Set("X-Request-Id", "mine-1")
	resp, err = h.client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.Eventually(t, func() bool { return len(h.handler.Recent()) == 2 }, wait, time.Millisecond)
	rec := h.handler.Recent()
	require.Equal(t, "mine-1", rec[0].RequestID)
	require.Regexp(t, `^kvr-[0-9a-f]{12}-1$`, rec[1].RequestID)
	h.ups[0].mu.Lock()
	defer h.ups[0].mu.Unlock()
	require.Equal(t, rec[1].RequestID, h.ups[0].headers[0].Get("X-Request-Id"))
	require.Equal(t, "mine-1", h.ups[0].headers[1].Get("X-Request-Id"))
	require.Equal(t, testModel, rec[1].Model)
}

// The status page renders a server configuration with every optional
// section set, under the keys of the gateway's config file: the disagg
// block holds the profile's keys beside mode and exchange.
func TestConfigTextRendersEveryServerSection(t *testing.T) {
	s := &Server{cfg: ServerConfig{Listen: ":8080", Policy: PolicyPrecise, Router: kvroute.DefaultConfig(),
		Admission: &admission.Config{}, EngineMetrics: &enginemetrics.Config{}, LoRA: &lora.Config{},
		Approximate: &approx.Config{}, Disagg: &disagg.Config{NonCachedTokens: 512},
		DisaggHost: DisaggHostConfig{Mode: DisaggModeExchange, Exchange: sidecar.Config{PrefillTimeout: 3 * time.Second}},
		Session:    &session.Config{Strict: true}, Models: &models.Config{Label: "served-models"}, PeerLoadFromMetrics: true}}
	text := configText(s.shownConfig())
	for _, want := range []string{"listen: \":8080\"\n", "router.blockSize: ", "admission.", "engineMetrics.", "lora.",
		"approximate.", "disagg.nonCachedTokens: 512\n", "disagg.mode: \"exchange\"\n", "disagg.exchange.prefillTimeout: 3s\n",
		"session.strict: true\n", "models.label: \"served-models\"\n", "peerLoadFromMetrics: true\n"} {
		require.Contains(t, text, want)
	}
}

// A field an embedded struct shares its key with is shown once, with the
// value of the outer field, as encoding/json reads and writes it (and the
// gateway's config file sets it): router.events' replay and topicFilter
// hide those of the kvevents.PoolConfig it embeds, whose values the router
// overrides, and the page showed both, the second contradicting the first.
func TestConfigTextShowsEachKeyOnce(t *testing.T) {
	cfg := kvroute.DefaultConfig()
	cfg.Events.Replay = new(true)
	cfg.Events.TopicFilter = new("kv@")
	text := configText(struct {
		Router kvroute.Config `json:"router"`
	}{cfg})
	seen := map[string]string{}
	for l := range strings.Lines(text) {
		path, value, _ := strings.Cut(strings.TrimSuffix(l, "\n"), ": ")
		prev, dup := seen[path]
		require.False(t, dup, "%s shown twice: %s and %s", path, prev, value)
		seen[path] = value
	}
	require.Equal(t, "true", seen["router.events.replay"])
	require.Equal(t, `"kv@"`, seen["router.events.topicFilter"])
}

// A switch named like a credential is no credential: the status page shows
// the proxy's corsAllowCredentials as true or false (it hid a true one as
// [redacted], so an operator checking why browsers were refused could not
// read it), while a string under such a name stays hidden.
func TestConfigTextShowsSwitchesNamedLikeCredentials(t *testing.T) {
	text := configText(struct {
		Proxy   Config `json:"proxy"`
		Secrets struct {
			UseCredentials bool   `json:"useCredentials"`
			Credential     string `json:"credential"`
		} `json:"secrets"`
	}{Proxy: Config{CORSAllowedOrigins: []string{"*"}, CORSAllowCredentials: true},
		Secrets: struct {
			UseCredentials bool   `json:"useCredentials"`
			Credential     string `json:"credential"`
		}{true, "secret-8"}})
	require.Contains(t, text, "proxy.corsAllowCredentials: true\n")
	require.Contains(t, text, "secrets.useCredentials: true\n")
	require.Contains(t, text, "secrets.credential: [redacted]\n")
	require.NotContains(t, text, "secret-8")
}
