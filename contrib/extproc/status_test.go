package extproc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The picker's status handler over real HTTP: /ready follows the picker's
// readiness and the router's index (200 once every engine's stream is
// live, 503 with the reason after Shutdown), and the status page lists the
// endpoints with their stream state and the latest request with the
// endpoints named to Envoy and the one that served.
func TestStatusHandlerServesReadyAndStatusPage(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{Fallbacks: 1}, engineOpts{}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()
	status := httptest.NewServer(h.picker.StatusHandler(h.router))
	defer status.Close()

	get := func(path string) (int, string) {
		resp, err := client.Get(status.URL + path)
		require.NoError(t, err)
		return resp.StatusCode, readAll(t, resp.Body)
	}
	type ready struct {
		Ready     bool   `json:"ready"`
		Reason    string `json:"reason"`
		Endpoints []struct {
			ID    string `json:"id"`
			State string `json:"state"`
			Mode  string `json:"mode"`
		} `json:"endpoints"`
		CacheModes  string `json:"cacheModes"`
		ModeWarning string `json:"modeWarning"`
	}
	require.Eventually(t, func() bool { code, _ := get(ReadyPath); return code == http.StatusOK }, wait, 5*time.Millisecond,
		"ready once both engines' streams are live")
	_, body := get(ReadyPath)
	var r ready
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.True(t, r.Ready)
	require.Len(t, r.Endpoints, 2)
	for _, e := range r.Endpoints {
		require.Equal(t, "live", e.State, e.ID)
	}
	require.Eventually(t, func() bool { // the modes are read again every second
		_, body := get(ReadyPath)
		r = ready{}
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		return r.CacheModes == "2 precise, 0 approximate, 0 blind"
	}, wait, 5*time.Millisecond)
	require.Empty(t, r.ModeWarning)
	for _, e := range r.Endpoints {
		require.Equal(t, "precise", e.Mode, e.ID)
	}

	resp := postThrough(t, client, envoy.URL, completionsBody(prompt(41, 40, "status"), false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	served := resp.Header.Get(EndpointHeader)
	readAll(t, resp.Body)
	h.idle()

	code, page := get(StatusPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `<b id="ready">`)
	for _, e := range h.engines {
		require.Contains(t, page, `data-id="`+e.id+`"`)
	}
	require.Contains(t, page, `class="live"`)
	require.Contains(t, page, `<b id="modes">2 precise, 0 approximate, 0 blind</b>`)
	require.NotContains(t, page, `id="mode-warning"`)
	row := page[strings.Index(page, `<tr class="request">`):]
	require.Contains(t, row, "/v1/completions")
	require.Contains(t, row, testModel)
	require.Contains(t, row, "<td>"+served+"</td>", "served by")
	require.Regexp(t, `<td>127\.0\.0\.1:\d+,127\.0\.0\.1:\d+</td>`, row, "the pick and its fallback are named")
	require.Contains(t, row, "routed")
	require.Contains(t, row, `<td class="mode precise">precise</td>`, "the request's cache mode")
	require.Regexp(t, `<td>(sticky|no_match|load_override|[a-z_]+)</td><td>routed</td>`, row, "the filter outcome by name")

	h.picker.Shutdown()
	code, body = get(ReadyPath)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.False(t, r.Ready)
	require.NotEmpty(t, r.Reason)
}

// heldBack is a router behind a host's own reason to hold the picker back
// (kvroute-epp's standby replica waiting for its leader's Lease).
type heldBack struct {
	src    ReadinessSource
	reason atomic.Pointer[string]
	asked  atomic.Int64 // NotReady calls: FollowReadiness's rounds
}

func (h *heldBack) NotReady() string {
	h.asked.Add(1)
	if r := h.reason.Load(); r != nil && *r != "" {
		return *r
	}
	return h.src.NotReady()
}

// /ready gives the reason of the source FollowReadiness follows when the
// router has caught up but the source holds the picker back, rather than
// blaming endpoint discovery; once the source lets go, it is ready.
func TestReadyGivesTheFollowedSourcesReason(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	src := &heldBack{src: h.router}
	standby := "standing by: another replica holds the leader election Lease llm/epp"
	src.reason.Store(&standby)
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() { defer close(followed); h.picker.FollowReadiness(ctx, src, 5*time.Millisecond) }()
	defer func() { cancel(); <-followed }()
	status := httptest.NewServer(h.picker.StatusHandler(h.router))
	defer status.Close()
	ready := func() (int, string) { return readyReason(t, status) }

	require.Eventually(t, func() bool { return h.router.NotReady() == "" }, wait, 5*time.Millisecond, "the engine's stream caught up")
	heldBackWithReason := func() bool {
		code, reason := ready()
		return code == http.StatusServiceUnavailable && reason == standby
	}
	require.Eventually(t, heldBackWithReason, wait, 5*time.Millisecond, "the source's reason, not endpoint discovery's")

	none := ""
	src.reason.Store(&none)
	require.Eventually(t, func() bool { code, reason := ready(); return code == http.StatusOK && reason == "" }, wait, 5*time.Millisecond)
}

// Without endpoints, /ready says why when the followed source knows (a
// host's endpoint discovery: its InferencePool's CRD is not installed, the
// pool is missing or being deleted), not only that there are none.
func TestReadyWithoutEndpointsGivesTheSourcesReason(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}) // no endpoints
	defer h.close()
	src := &heldBack{src: h.router}
	crd := "k8s: InferencePool CRD inference.networking.k8s.io/v1 not installed"
	src.reason.Store(&crd)
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() { defer close(followed); h.picker.FollowReadiness(ctx, src, 5*time.Millisecond) }()
	defer func() { cancel(); <-followed }()
	status := httptest.NewServer(h.picker.StatusHandler(h.router))
	defer status.Close()
	require.Eventually(t, func() bool {
		code, reason := readyReason(t, status)
		return code == http.StatusServiceUnavailable && reason == "no endpoints: "+crd
	}, wait, 5*time.Millisecond)

	none := ""
	src.reason.Store(&none)
	require.Eventually(t, func() bool {
		code, reason := readyReason(t, status)
		return code == http.StatusServiceUnavailable && reason == "no endpoints"
	}, wait, 5*time.Millisecond)
}

// TestReadyAfterShutdownSaysShuttingDown checks that once Shutdown has run
// ReadyPath fails with the reason "shutting down", not a stale one, and that
// a FollowReadiness still running (its source ready) does not make the
// picker ready again while the gRPC server drains.
func TestReadyAfterShutdownSaysShuttingDown(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	src := &heldBack{src: h.router}
	go func() { defer close(followed); h.picker.FollowReadiness(ctx, src, 5*time.Millisecond) }()
	defer func() { cancel(); <-followed }()
	status := httptest.NewServer(h.picker.StatusHandler(h.router))
	defer status.Close()
	ready := func() (int, string) { return readyReason(t, status) }
	require.Eventually(t, func() bool { code, _ := ready(); return code == http.StatusOK }, wait, 5*time.Millisecond, "ready once the stream caught up")

	h.picker.Shutdown()
	code, reason := ready()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, shuttingDownReason, reason)
	// The follower keeps asking a source that says ready; the rounds it
	// runs after Shutdown, and a SetReady of the host's, must leave the
	// picker not ready.
	h.picker.SetReady(true)
	after := src.asked.Load()
	require.Eventually(t, func() bool { return src.asked.Load() >= after+3 }, wait, 5*time.Millisecond, "three more rounds of the follower")
	require.Equal(t, "", src.NotReady())
	code, reason = ready()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, shuttingDownReason, reason)
}

// readyReason asks status's ReadyPath and returns the status code and the
// reason it gives.
func readyReason(t *testing.T, status *httptest.Server) (int, string) {
	t.Helper()
	resp, err := status.Client().Get(status.URL + ReadyPath)
	require.NoError(t, err)
	var r struct {
		Reason string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(readAll(t, resp.Body)), &r))
	return resp.StatusCode, r.Reason
}

// The status handler's paths answer GET and HEAD; another method (a POST
// to /ready from a misconfigured probe) is answered 405 with Allow, as the
// kvroute gateway answers it, instead of being served as a GET.
func TestStatusHandlerAnswersOtherMethods405(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	status := httptest.NewServer(h.picker.StatusHandler(h.router))
	defer status.Close()
	client := status.Client()
	defer client.CloseIdleConnections()
	for _, path := range []string{ReadyPath, StatusPath} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			req, err := http.NewRequest(method, status.URL+path, strings.NewReader("{}"))
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			readAll(t, resp.Body)
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", method, path)
			require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"), "%s %s", method, path)
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, err := http.NewRequest(method, status.URL+path, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			readAll(t, resp.Body)
			require.NotEqual(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", method, path)
		}
	}
}
