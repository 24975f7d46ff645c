package render

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

const (
	messagesPath  = "/v1/messages/render"
	responsesPath = "/v1/responses/render"
	chatPath      = "/v1/chat/completions/render"
)

func messagesReq() *Request {
	return &Request{API: APIMessages, Authorization: "Bearer user-key",
		Body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hallo"}]}`)}
}

func responsesReq() *Request {
	return &Request{API: APIResponses, Authorization: "Bearer user-key",
		Body: []byte(`{"model":"gpt-5","input":"Hallo","cache_salt":"s1"}`)}
}

// probes returns the bodies of the probe requests a server received.
func probes(s *fakeVLLM) []recorded {
	var out []recorded
	for _, r := range s.all() {
		if strings.Contains(string(r.Body), `"warmup"`) {
			out = append(out, r)
		}
	}
	return out
}

func TestAutoModeNativeWhenProbeSucceeds(t *testing.T) {
	for _, tc := range []struct {
		req  func() *Request
		path string
	}{{messagesReq, messagesPath}, {responsesReq, responsesPath}} {
		t.Run(tc.path, func(t *testing.T) {
			s := newFakeVLLM(t, "a")
			// The user's model name is forwarded natively; this renderer
			// accepts it.
			s.on(tc.path, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(generateRequest([]uint32{1, 2}, "", ""))) })
			c := newTestClient(t, nil, s)
			for range 3 {
				_, err := c.Render(context.Background(), tc.req())
				require.NoError(t, err)
			}
			ps := probes(s)
			require.Len(t, ps, 1, "probed once")
			require.Equal(t, tc.path, ps[0].Path)
			require.Contains(t, string(ps[0].Body), `"model":"qwen3-8b"`, "probes use the configured model")
			require.Equal(t, "Bearer user-key", ps[0].Header.Get("Authorization"), "request-time discovery uses the request's header")
			require.Equal(t, 4, s.hits(tc.path))
			require.Equal(t, 0, s.hits(chatPath))
			m, err := c.Discover(context.Background(), tc.req().API, "")
			require.NoError(t, err)
			require.Equal(t, ModeNative, m)
		})
	}
}

func TestAutoModeLegacyForMissingRoute(t *testing.T) {
	cases := []struct {
		name string
		req  func() *Request
		path string
		h    http.HandlerFunc
	}{
		{"messages 404", messagesReq, messagesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) }},
		{"messages 405", messagesReq, messagesPath, status(405)},
		{"responses 404", responsesReq, responsesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) }},
		{"responses 405", responsesReq, responsesPath, status(405)},
		{"responses 501", responsesReq, responsesPath, status(501)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeVLLM(t, "a")
			s.on(tc.path, tc.h)
			var logs logBuffer
			cfg := DefaultConfig()
			cfg.ModelName = "qwen3-8b"
			c, err := New(cfg, Options{Set: telemetry.Set{Logger: logs.logger()}})
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))

			for range 2 {
				res, err := c.Render(context.Background(), tc.req())
				require.NoError(t, err)
				require.NotEmpty(t, res.Prompts[0].TokenIDs)
			}
			require.Equal(t, 1, s.hits(tc.path), "only the probe went to the native route")
			// chat probe + two translated requests
			require.Equal(t, 3, s.hits(chatPath))
			last := s.last()
			require.Equal(t, chatPath, last.Path)
			require.Contains(t, string(last.Body), `"model":"qwen3-8b"`)
			require.Contains(t, string(last.Body), `"content":"Hallo"`)
			require.Contains(t, string(last.Body), `"return_mm_kwargs":false`)
			require.Equal(t, "Bearer user-key", last.Header.Get("Authorization"))
			require.Equal(t, 1, strings.Count(logs.String(), "legacy mode is deprecated"))
		})
	}
}

func TestAutoModeLegacyKeepsRequestSalt(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on(responsesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	c := newTestClient(t, nil, s)
	res, err := c.Render(context.Background(), responsesReq())
	require.NoError(t, err)
	require.Equal(t, "s1", res.CacheSalt)
}

// 501 means "no handler for this model" only for Responses; for Messages it
// leaves the mode unresolved, and the request goes to the native route.
func TestAutoModeMessages501StaysUnresolved(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on(messagesPath, status(501))
	c := newTestClient(t, nil, s)
	_, err := c.Render(context.Background(), messagesReq())
	e := asError(t, err)
	require.Equal(t, 501, e.Status)
	require.Equal(t, 0, s.hits(chatPath))
	m, err := c.Discover(context.Background(), APIMessages, "")
	require.Error(t, err)
	require.Equal(t, ModeAuto, m)
}

func TestAutoModeUnresolvedThenResolvedLater(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on(messagesPath, status(500))
	c := newTestClient(t, nil, s)

	// Probe answers 500: unresolved; the request itself goes native and fails.
	_, err := c.Render(context.Background(), messagesReq())
	require.Equal(t, 500, asError(t, err).Status)
	require.Equal(t, 0, s.hits(chatPath))
	require.Len(t, probes(s), 1)

	// The route is now missing and chat works: the next request resolves legacy.
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	_, err = c.Render(context.Background(), messagesReq())
	require.NoError(t, err)
	require.Len(t, probes(s), 3, "native probe + chat probe")
	require.Equal(t, chatPath, s.last().Path)
	m, err := c.Discover(context.Background(), APIMessages, "")
	require.NoError(t, err)
	require.Equal(t, ModeLegacy, m)
}

func TestAutoModeFailedChatProbeStaysUnresolved(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	s.on(chatPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	c := newTestClient(t, nil, s)
	_, err := c.Render(context.Background(), messagesReq())
	require.ErrorIs(t, err, ErrRenderNotEnabled)
	require.Contains(t, err.Error(), "--enable-scale-out")
	m, derr := c.Discover(context.Background(), APIMessages, "")
	require.ErrorIs(t, derr, ErrRenderNotEnabled)
	require.Equal(t, ModeAuto, m)
}

func TestUserRequestErrorNeverChangesMode(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, nil, s)
	m, err := c.Discover(context.Background(), APIMessages, "Bearer warmup-key")
	require.NoError(t, err)
	require.Equal(t, ModeNative, m)
	require.Equal(t, "Bearer warmup-key", probes(s)[0].Header.Get("Authorization"))

	// The user's model is unknown to the renderer: 404 ErrorResponse.
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, "NotFoundError", "The model `claude-sonnet-4-5` does not exist.")
	})
	_, err = c.Render(context.Background(), messagesReq())
	require.ErrorIs(t, err, ErrModelNotFound)
	require.Contains(t, err.Error(), "model mismatch")
	m, err = c.Discover(context.Background(), APIMessages, "")
	require.NoError(t, err)
	require.Equal(t, ModeNative, m)
	require.Len(t, probes(s), 1)
	require.Equal(t, 0, s.hits(chatPath))
}

func TestDiscoveryIsSerialized(t *testing.T) {
	s := newFakeVLLM(t, "a")
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{})
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		<-release
		w.Write([]byte(generateRequest([]uint32{1}, "", "")))
	})
	c := newTestClient(t, nil, s)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := c.Render(context.Background(), messagesReq())
			assert.NoError(t, err)
		})
	}
	<-entered
	close(release)
	wg.Wait()
	require.Len(t, probes(s), 1)
	require.Equal(t, 9, s.hits(messagesPath))
}

func TestDiscoveryWaitIsCancellable(t *testing.T) {
	s := newFakeVLLM(t, "a")
	release := make(chan struct{})
	entered := make(chan struct{})
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		notFound(w)
	})
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Timeout = time.Minute // the budget; only the caller's deadline can end the wait sooner
	c, err := New(cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))

	first := make(chan error, 1)
	go func() {
		_, err := c.Render(context.Background(), messagesReq())
		first <- err
	}()
	<-entered // the first request holds the discovery slot

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = renderOrHang(t, c, ctx, messagesReq())
	require.Equal(t, ReasonTimeout, asError(t, err).Reason)

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = c.Render(ctx2, messagesReq())
	require.Equal(t, ReasonCanceled, asError(t, err).Reason)

	close(release)
	require.NoError(t, <-first) // 404 then chat probe succeeds: legacy
	require.Equal(t, 1, s.hits(messagesPath))
}

// Mode discovery's probes count in no render metric, as Discover says: a
// legacy renderer's 404 on the native probe is what discovery expects, and
// it showed as a failed render attempt
// (kvroute_render_attempt_failures_total{reason="status"}) and in the queue
// wait histogram. The render that follows, translated for the legacy
// renderer, counts as usual, and a probe run inside a render counts no more
// than that render.
func TestDiscoveryProbesAreNotCounted(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	reg := prometheus.NewRegistry()
	c, err := New(testConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))

	m, err := c.Discover(context.Background(), APIMessages, "")
	require.NoError(t, err)
	require.Equal(t, ModeLegacy, m)
	require.Len(t, probes(s), 2, "the native probe, then the chat probe")
	require.Empty(t, renderCounts(t, reg), "the probes are counted")

	_, err = c.Render(context.Background(), messagesReq())
	require.NoError(t, err)
	want := map[string]float64{MetricDuration + `{result="success"}`: 1, metricQueueWait: 1}
	require.Equal(t, want, renderCounts(t, reg), "one render, counted once")

	// Discovery run by a render: its probes again count in nothing.
	_, err = c.Render(context.Background(), responsesReq())
	require.NoError(t, err)
	require.Len(t, probes(s), 3, "the native Responses probe, answered")
	want[MetricDuration+`{result="success"}`], want[metricQueueWait] = 2, 2
	require.Equal(t, want, renderCounts(t, reg))
}

// renderCounts returns the non-zero render counters and histogram counts
// on reg, by name and labels; the connection counters (probes use
// connections like renders) and the gauges are left out.
func renderCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kvroute_render_connections_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			if v == 0 {
				continue
			}
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + strconv.Quote(l.GetValue()) + "}"
			}
			out[key] = v
		}
	}
	return out
}

func TestConfiguredModesDoNotProbe(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, func(c *Config) { c.MessagesRenderMode = ModeLegacy; c.ResponsesRenderMode = ModeNative }, s)
	_, err := c.Render(context.Background(), messagesReq())
	require.NoError(t, err)
	_, err = c.Render(context.Background(), responsesReq())
	require.NoError(t, err)
	require.Empty(t, probes(s))
	require.Equal(t, 1, s.hits(chatPath))
	require.Equal(t, 0, s.hits(messagesPath))
	require.Equal(t, 1, s.hits(responsesPath))
	m, err := c.Discover(context.Background(), APIMessages, "")
	require.NoError(t, err)
	require.Equal(t, ModeLegacy, m)
	_, err = c.Discover(context.Background(), APICompletions, "")
	require.ErrorIs(t, err, ErrInvalidRequest)
}

func TestLegacyUntranslatableRequestIsAnError(t *testing.T) {
	s := newFakeVLLM(t, "a")
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.ResponsesRenderMode = ModeLegacy
	c, err := New(cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))
	_, err = c.Render(context.Background(), &Request{API: APIResponses, Body: []byte(`{"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`)})
	require.ErrorIs(t, err, ErrUntranslatable)
	require.Equal(t, ReasonOther, asError(t, err).Reason)
	require.Equal(t, 1.0, failures(t, reg, "other"))
	require.Equal(t, 0, s.hits(""))
}

// Requests that queued for the discovery slot behind a probe that left the
// mode unresolved go to the native route without probing again: each of
// them probed in turn, so that behind a renderer failing or slow to answer
// the probe every Messages request waited for all the probes queued before
// its own, up to the whole budget, instead of for the one under way.
func TestDiscoveryQueuedBehindAFailedProbeGoesNative(t *testing.T) {
	s := newFakeVLLM(t, "a")
	release := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"warmup"`) {
			w.Write([]byte(generateRequest([]uint32{1}, "", "")))
			return
		}
		first := false
		once.Do(func() { first = true; close(entered) })
		if first {
			<-release
		}
		writeError(w, 500, "InternalServerError", "probe failed")
	})
	c := newTestClient(t, nil, s)
	queued := make(chan struct{}, 16)
	c.queueHook = func() { queued <- struct{}{} }

	const n = 5
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := c.Render(context.Background(), messagesReq())
		assert.NoError(t, err)
	})
	<-entered // the first request probes, holding the slot
	for range n - 1 {
		wg.Go(func() {
			_, err := c.Render(context.Background(), messagesReq())
			assert.NoError(t, err)
		})
	}
	for range n {
		<-queued // every request reached the slot: the first holds it, the others wait
	}
	close(release)
	wg.Wait()
	require.Equal(t, 1, len(probes(s)), "one probe for the requests that queued behind it")
	require.Equal(t, 1+n, s.hits(messagesPath))
}
