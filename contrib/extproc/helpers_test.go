package extproc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

const (
	testModel = "kvroute/sim-extproc"
	wait      = 20 * time.Second // generous: the awaited event ends every wait
)

// engineOpts configure one simulated engine of a test.
type engineOpts struct {
	noRender   bool          // without --enable-scale-out: render answers 404
	decodeStep time.Duration // 0: 1ms
	role       string        // its endpoint's Role
	front      bool          // also served by an HTTP server in front of it, its endpoint's Address
}

// simEngine is one simulated vLLM server with KV events and replay.
type simEngine struct {
	srv    *server.Server
	id     string
	served chan error
	front  *httptest.Server // engineOpts.front: its endpoint's Address
}

func startEngine(t *testing.T, o engineOpts) *simEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	id := ln.Addr().String()
	replay := "tcp://127.0.0.1:0"
	step := o.decodeStep
	if step == 0 {
		step = time.Millisecond
	}
	srv, err := server.New(server.Config{
		Model:          testModel,
		EnableScaleOut: !o.noRender,
		Engine: simengine.Config{
			BlockSize:              16,
			NumGPUBlocks:           512,
			PrefillTokensPerSecond: 1_000_000,
			DecodeStep:             step,
		},
		KVEvents: server.KVEventsConfig{
			EnableKVCacheEvents: true,
			Publisher:           "zmq",
			Endpoint:            "tcp://127.0.0.1:0",
			ReplayEndpoint:      &replay,
			Topic:               "kv@" + id + "@" + testModel,
		},
	}, server.Options{})

	require.NoError(t, err)
	e := &simEngine{srv: srv, id: id, served: make(chan error, 1)}
	go func() { e.served <- srv.Serve(ln) }()
	if o.front {
		e.front = httptest.NewServer(srv.Handler())
	}
	return e
}

func (e *simEngine) close() {
	if e.front != nil {
		e.front.Close()
	}
	_ = e.srv.Close()
	<-e.served
}

func (e *simEngine) endpoint() kvroute.Endpoint {
	ep := kvroute.Endpoint{ID: e.id, EventsAddress: e.srv.KVEventsEndpoint(), ReplayAddress: e.srv.ReplayEndpoint()}
	if e.front != nil {
		ep.Address = e.front.URL + "/"
	}
	return ep
}

// harness is a picker with its Router, served over gRPC on loopback, and a
// client connection to it.
type harness struct {
	t       *testing.T
	engines []*simEngine
	router  *kvroute.Router
	picker  *Server
	reg     *prometheus.Registry
	grpc    *grpc.Server
	conn    *grpc.ClientConn
	client  extprocv3.ExternalProcessorClient
	stopped chan struct{}
	adm     *admission.Controller // nil without an admission stage
	session *session.Affinity     // nil without session affinity
}

func newHarness(t *testing.T, cfg Config, engines ...engineOpts) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, nil, engines...)
}

// newHarnessWith is newHarness with an admission stage when acfg is set.
func newHarnessWith(t *testing.T, cfg Config, acfg *admission.Config, engines ...engineOpts) *harness {
	t.Helper()
	return newHarnessProfile(t, cfg, acfg, nil, engines...)
}

// newHarnessProfile is newHarnessWith with the Router's profile step prof
// (nil: the default), the engines' endpoints taking their engineOpts' roles.
func newHarnessProfile(t *testing.T, cfg Config, acfg *admission.Config, prof kvroute.Profile, engines ...engineOpts) *harness {
	t.Helper()
	return newHarnessOpts(t, cfg, harnessOpts{acfg: acfg, prof: prof}, engines...)
}

// newHarnessSignals is newHarnessProfile with the admission's engine
// signals (its dispatch gate's; nil: none).
func newHarnessSignals(t *testing.T, cfg Config, acfg *admission.Config, prof kvroute.Profile, signals admission.EngineSignals, engines ...engineOpts) *harness {
	t.Helper()
	return newHarnessOpts(t, cfg, harnessOpts{acfg: acfg, prof: prof, signals: signals}, engines...)
}

// harnessOpts are a harness's optional stages.
type harnessOpts struct {
	acfg    *admission.Config       // an admission stage
	prof    kvroute.Profile         // the Router's profile step (nil: the default)
	session *session.Config         // session affinity: its scorer, its profile around prof, Options.Session
	signals admission.EngineSignals // the admission's dispatch gate's engine signals (nil: none)
	tp      trace.TracerProvider    // the Router's and the picker's (nil: no tracing)
}

// newHarnessOpts is newHarness with the stages o names.
func newHarnessOpts(t *testing.T, cfg Config, o harnessOpts, engines ...engineOpts) *harness {
	t.Helper()
	acfg, prof, signals := o.acfg, o.prof, o.signals
	h := &harness{t: t, reg: prometheus.NewRegistry(), stopped: make(chan struct{})}
	eps := []kvroute.Endpoint{}
	for _, o := range engines {
		e := startEngine(t, o)
		h.engines = append(h.engines, e)
		ep := e.endpoint()
		ep.Role = o.role
		eps = append(eps, ep)
	}
	rcfg := kvroute.DefaultConfig()
	rcfg.Model = testModel
	rcfg.BlockSize = 16
	var err error
	ropts := kvroute.Options{Set: telemetry.Set{Registerer: h.reg, TracerProvider: o.tp}, Profile: prof}
	ropts.Approximate, err = approx.New(approx.Config{}, approx.Options{Set: ropts.Set}) // the endpoints' cache modes
	require.NoError(t, err)
	if acfg != nil {
		h.adm, err = admission.New(*acfg, admission.Options{Set: ropts.Set, Signals: signals})
		require.NoError(t, err)
		ropts.Admission = h.adm
	}
	if o.session != nil {
		h.session, err = session.New(*o.session, session.Options{Set: ropts.Set})
		require.NoError(t, err)
		ropts.Scorers = append(ropts.Scorers, h.session.Scorer())
		ropts.Profile = h.session.Profile(ropts.Profile)
	}
	h.router, err = kvroute.New(context.Background(), rcfg, ropts)
	require.NoError(t, err)
	if h.adm != nil {
		h.adm.SetLoad(h.router.Load())
	}
	require.NoError(t, h.router.SetEndpoints(eps))
	if cfg.Model == "" {
		cfg.Model = testModel
	}
	h.picker, err = New(cfg, h.router, Options{Set: telemetry.Set{Registerer: h.reg, TracerProvider: o.tp}, Admission: h.adm, Approximate: ropts.Approximate,
		Session: h.session})
	require.NoError(t, err)
	h.picker.SetEndpoints(eps)
	h.picker.SetReady(true)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h.grpc = grpc.NewServer()
	h.picker.Register(h.grpc)
	go func() { defer close(h.stopped); _ = h.grpc.Serve(ln) }()
	h.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	h.client = extprocv3.NewExternalProcessorClient(h.conn)
	return h
}

func (h *harness) close() {
	_ = h.conn.Close()
	h.grpc.Stop()
	<-h.stopped
	if h.adm != nil {
		h.adm.Close()
	}
	h.router.Close()
	if h.session != nil {
		h.session.Close()
	}
	for _, e := range h.engines {
		e.close()
	}
}

// load returns the in-flight requests and tokens the router holds for id.
func (h *harness) load(id string) (tokens, requests int64) {
	tokens, requests, _ = h.router.Load().Load(id)
	return tokens, requests
}

// idle waits until no endpoint holds any in-flight request.
func (h *harness) idle() {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		for _, e := range h.engines {
			if tok, req := h.load(e.id); tok != 0 || req != 0 {
				return false
			}
		}
		return true
	}, wait, 5*time.Millisecond)
}

// counter reads a counter of the test registry (0 when absent).
func (h *harness) counter(name string, labels map[string]string) float64 {
	mfs, err := h.reg.Gather()
	require.NoError(h.t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// prompt is a completions prompt of about n words sharing a prefix per group.
func prompt(group, n int, suffix string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "g%d-w%d ", group, i)
	}
	return b.String() + suffix
}

func completionsBody(p string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":4,"stream":%v}`, testModel, p, stream)
}

func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// postThrough sends one completions request through an Envoy-behaving proxy.
func postThrough(t *testing.T, client *http.Client, url, body string) *http.Response {
	t.Helper()
	resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	return resp
}
