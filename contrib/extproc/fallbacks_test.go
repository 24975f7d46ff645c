package extproc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// With Config.Fallbacks the destination header and the envoy.lb metadata
// carry the same list, "pick,fallback,...", the pick first; a request
// without a prompt (passthrough) names the next endpoints of the rotation.
func TestProcessNamesFallbacksAfterThePick(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{Fallbacks: 2}, engineOpts{}, engineOpts{}, engineOpts{})
	defer h.close()
	all := []string{h.engines[0].id, h.engines[1].id, h.engines[2].id}

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hr := sendRequest(t, st, completionsBody(prompt(21, 40, "fallbacks"), false), nil)
	list := setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
	md := hr.GetDynamicMetadata().GetFields()[DefaultMetadataNamespace].GetStructValue().GetFields()[DefaultDestinationHeader].GetStringValue()
	require.Equal(t, list, md, "the header and the metadata never differ")
	ids := strings.Split(list, ",")
	require.Len(t, ids, 3)
	require.ElementsMatch(t, all, ids)
	require.NoError(t, st.Send(respHeaders(ids[0], true)))
	_, err = st.Recv()
	require.NoError(t, err)

	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/models", true, nil)))
	hr, err = st.Recv()
	require.NoError(t, err)
	ids = strings.Split(setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), ",")
	require.Len(t, ids, 3)
	require.ElementsMatch(t, all, ids)
	require.NoError(t, st.CloseSend())
	h.idle()

	_, err = New(Config{Fallbacks: MaxFallbacks + 1}, h.router, Options{})
	require.ErrorContains(t, err, "fallbacks")
}

// Envoy reports that a fallback served the request: the request's load moves
// from the pick to the fallback, the client is told the fallback's name, and
// the response's end releases it there.
func TestProcessServedFallbackMovesTheLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{Fallbacks: 1}, engineOpts{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hr := sendRequest(t, st, completionsBody(prompt(22, 40, "moved"), false), nil)
	ids := strings.Split(setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), ",")
	require.Len(t, ids, 2)
	pick, fallback := ids[0], ids[1]
	_, reqs := h.load(pick)
	require.EqualValues(t, 1, reqs)

	require.NoError(t, st.Send(respHeaders(fallback, false)))
	rh, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, fallback, setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), EndpointHeader))
	tok, reqs := h.load(pick)
	require.Zero(t, tok)
	require.Zero(t, reqs, "the pick holds nothing once the fallback served")
	tok, reqs = h.load(fallback)
	require.EqualValues(t, 1, reqs)
	require.Positive(t, tok, "the fallback prefills the prompt")

	require.NoError(t, st.Send(respBody("{}", true)))
	_, err = st.Recv()
	require.NoError(t, err)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_served_mismatch_total", nil))
	require.Equal(t, 1.0, h.counter("kvroute_extproc_served_fallback_total", nil))
}

// failFirstDial is an upstream transport whose first connection fails, as
// a pick whose pod just died: Envoy's retry goes down the picker's list.
type failFirstDial struct {
	next   *http.Transport
	calls  atomic.Int64
	failed atomic.Pointer[string] // the host that failed
}

func (f *failFirstDial) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.calls.Add(1) == 1 {
		host := r.URL.Host
		f.failed.Store(&host)
		return nil, errors.New("connect: connection refused (injected)")
	}
	return f.next.RoundTrip(r)
}

// End to end: the pick's connection fails, Envoy (with a retry) sends the
// request to the fallback the picker named, reports it as served, and the
// request's load sits on the fallback while it streams.
func TestEndToEndFallbackServesWhenThePickFails(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{Fallbacks: 1}, engineOpts{}, engineOpts{})
	defer h.close()
	tr := &failFirstDial{next: &http.Transport{MaxIdleConnsPerHost: 16}}
	srv := httptest.NewServer(envoysim.New(envoysim.Config{ChunkBytes: 512, Retries: 1}, h.client, &http.Client{Transport: tr}))
	client := &http.Client{Transport: &http.Transport{}}
	defer func() {
		client.CloseIdleConnections()
		srv.Close()
		tr.next.CloseIdleConnections()
	}()

	body := strings.Replace(completionsBody(prompt(23, 60, "fallback"), true), `"max_tokens":4`, `"max_tokens":1000`, 1)
	resp := postThrough(t, client, srv.URL, body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	dead := *tr.failed.Load()
	served := resp.Header.Get(EndpointHeader)
	require.NotEqual(t, dead, served, "the fallback served")
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)
	_, deadReqs := h.load(dead)
	_, servedReqs := h.load(served)
	require.Zero(t, deadReqs, "the failed pick holds nothing")
	require.EqualValues(t, 1, servedReqs, "the fallback holds the request while it streams")
	readAll(t, resp.Body)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_served_fallback_total", nil))
}

// After a fallback served, the request's first chunk and its end move the
// fallback's accounting, and the admission is told of the fallback, not the
// pick: a request the queue just released to the pick keeps its claim
// there, so the next queued request is not let through behind it before
// its pick shows. Each way the request ends is checked: its first chunk,
// its end of stream, and its stream going away.
func TestProcessServedFallbackNotifiesTheAdmissionOfTheFallback(t *testing.T) {
	for _, end := range []string{"first chunk", "end of stream", "stream gone"} {
		t.Run(end, func(t *testing.T) {
			defer leakcheck.Check(t)()
			acfg := admission.Config{
				Saturation: admission.Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 1},
				// Nothing but Notify and arrivals serves the queue, and a
				// claim lapses only when its endpoint's accounting moves.
				Recheck: time.Hour, Settle: time.Hour,
			}
			h := newHarnessWith(t, Config{Fallbacks: 1}, &acfg, engineOpts{}, engineOpts{})
			defer h.close()
			ctx, cancel := context.WithCancel(ctxT(t))
			st, err := h.client.Process(ctx)
			require.NoError(t, err)
			hr := sendRequest(t, st, completionsBody(prompt(24, 40, "claims"), false), nil)
			ids := strings.Split(setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), ",")
			require.Len(t, ids, 2)
			pick, fallback := ids[0], ids[1]
			onPick := []kvroute.Endpoint{{ID: pick}}

			// A request for the pick alone queues behind the open request
			// there, and is released to it when the load moves to the
			// fallback: it claims the pick and never shows there.
			released := admitAsync(ctx, h.adm, onPick)
			require.Eventually(t, func() bool { return h.adm.Queued() == 1 }, wait, time.Millisecond)
			require.NoError(t, st.Send(respHeaders(fallback, end == "end of stream")))
			_, err = st.Recv()
			require.NoError(t, err)
			require.NoError(t, <-released)

			// The next one waits on the claim.
			next := admitAsync(ctx, h.adm, onPick)
			require.Eventually(t, func() bool { return h.adm.Queued() == 1 }, wait, time.Millisecond)
			if end == "first chunk" {
				require.NoError(t, st.Send(respBody("data: {}\n\n", false)))
				_, err = st.Recv() // answered after the admission was told
				require.NoError(t, err)
				require.Equal(t, 1, h.adm.Queued(), "the pick's claim stands: the fallback's accounting moved")
			}
			require.NoError(t, st.CloseSend())
			_, err = st.Recv() // the stream ends once the picker let go of the request
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, 1, h.adm.Queued(), "the pick's claim stands: the fallback's accounting moved")
			cancel()
			require.ErrorIs(t, <-next, context.Canceled)
			h.idle()
		})
	}
}

// admitAsync runs the admission's Admit for a request whose candidates are
// eps on a goroutine, and delivers its answer.
func admitAsync(ctx context.Context, adm *admission.Controller, eps []kvroute.Endpoint) <-chan error {
	done := make(chan error, 1)
	go func() { done <- adm.Admit(ctx, &kvroute.Request{}, eps) }()
	return done
}

// A served-endpoint report that is not a string names no endpoint: it is
// counted, not taken for a retry elsewhere, and the request's load stays
// with the pick until its response ends.
func TestProcessServedEndpointNotAString(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hr := sendRequest(t, st, completionsBody(prompt(7, 20, "served"), false), nil)
	pick := setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
	require.NotEmpty(t, pick)
	rh := respHeaders("", false)
	rh.MetadataContext.FilterMetadata[DefaultMetadataNamespace].Fields[DefaultServedKey] = structpb.NewNumberValue(8000)
	require.NoError(t, st.Send(rh))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, pick, setHeader(resp.GetResponseHeaders().GetResponse().GetHeaderMutation(), EndpointHeader))
	require.Equal(t, 1.0, h.counter("kvroute_extproc_invalid_served_endpoints_total", nil))
	require.Equal(t, 0.0, h.counter("kvroute_extproc_served_mismatch_total", nil))
	_, requests := h.load(pick)
	require.Equal(t, int64(1), requests, "the pick holds the request until its response ends")
	require.NoError(t, st.Send(respBody("{}", true)))
	_, err = st.Recv()
	require.NoError(t, err)
	h.idle()
}
