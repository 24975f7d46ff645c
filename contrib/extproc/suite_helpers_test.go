package extproc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/testport"
)

// The Inference Extension's conformance suite (conformance/tests in
// kubernetes-sigs/gateway-api-inference-extension) runs against a gateway
// on a Kubernetes cluster: echo servers as model servers, one picker per
// InferencePool, requests steered with the picker's test hooks. The tests
// named after its tests (Test<ShortName>) replay its picker-facing cases
// here through envoysim: echo servers on distinct loopback addresses stand
// for the pods (127.0.0.2, 127.0.0.3, ...; a pod's data-parallel ranks are
// ports of one address), a kvroute picker with its hooks on for the pool's
// picker, and envoysim for the gateway.

// suiteModel and suiteBody are the suite's model name and request body.
const (
	suiteModel = "conformance-fake-model"
	suiteBody  = `{"model":"conformance-fake-model","prompt":"Answer with no disclaimers: What are the advantages and disadvantages of genetically modified food?"}`
)

// echoReply is what the suite's echo server answers with (the fields the
// suite reads): which pod, and which of its ports, served the request.
type echoReply struct {
	Path     string `json:"path"`
	Pod      string `json:"pod"`
	HTTPPort string `json:"httpPort"`
}

// suitePod is one model-server pod: an echo server on each of its ports.
type suitePod struct {
	name, ip string
	ports    []string
	ids      []string // ip:port per rank
}

// suitePool is an InferencePool: its pods, a kvroute picker with the
// conformance hooks on, served over gRPC, and envoysim in front of it.
type suitePool struct {
	t       *testing.T
	pods    []*suitePod
	servers []*http.Server
	router  *kvroute.Router
	picker  *Server
	grpc    *grpc.Server
	conn    *grpc.ClientConn
	envoy   *httptest.Server
	up      *http.Transport
	wg      sync.WaitGroup
	stopped bool
}

// newSuitePool starts a pool of len(ips) pods named prefix-<i>, with ranks
// ports each; envoysim retries down the picker's list (two fallbacks) and,
// like the suite's gateways, fails open to the pool's endpoints.
func newSuitePool(t *testing.T, prefix string, ips []string, ranks int) *suitePool {
	t.Helper()
	p := &suitePool{t: t, up: &http.Transport{MaxIdleConnsPerHost: 32}}
	var eps []kvroute.Endpoint
	for i, ip := range ips {
		pod := &suitePod{name: prefix + "-" + string(rune('a'+i)), ip: ip}
		for range ranks {
			// Outside the ephemeral range (testport): a pod's server the
			// test stops is refused, not answered by another socket that
			// took its port.
			ln := testport.Listen(t, ip)
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			pod.ports = append(pod.ports, port)
			pod.ids = append(pod.ids, ln.Addr().String())
			eps = append(eps, kvroute.Endpoint{ID: ln.Addr().String()})
			srv := &http.Server{Handler: echoHandler(pod.name, port)}
			p.servers = append(p.servers, srv)
			p.wg.Add(1)
			go func() { defer p.wg.Done(); _ = srv.Serve(ln) }()
		}
		p.pods = append(p.pods, pod)
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = suiteModel
	cfg.Events.Enabled = new(false) // echo servers publish no KV events and render nothing
	cfg.DisableRender = true
	var err error
	p.router, err = kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(t, err)
	require.NoError(t, p.router.SetEndpoints(eps))
	p.picker, err = New(Config{Model: suiteModel, ConformanceTestHooks: true, Fallbacks: 2}, p.router, Options{})
	require.NoError(t, err)
	p.picker.SetEndpoints(eps)
	p.picker.SetReady(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.grpc = grpc.NewServer()
	p.picker.Register(p.grpc)
	p.wg.Add(1)
	go func() { defer p.wg.Done(); _ = p.grpc.Serve(ln) }()
	p.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	failOpen := make([]string, len(eps))
	for i, e := range eps {
		failOpen[i] = e.ID
	}
	p.envoy = httptest.NewServer(envoysim.New(envoysim.Config{Retries: 2, FailOpen: failOpen},
		extprocv3.NewExternalProcessorClient(p.conn), &http.Client{Transport: p.up}))
	return p
}

// echoHandler answers every request with the pod and port that served it,
// after reading the body, as the suite's echo server does.
func echoHandler(pod, port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoReply{Path: r.URL.Path, Pod: pod, HTTPPort: port})
	})
}

// stopPicker makes the pool's picker unavailable, as the suite's
// MakeServiceUnavailable does to its Service.
func (p *suitePool) stopPicker() {
	p.grpc.Stop()
	p.stopped = true
}

func (p *suitePool) close() {
	p.envoy.Close()
	p.up.CloseIdleConnections()
	_ = p.conn.Close()
	if !p.stopped {
		p.grpc.Stop()
	}
	for _, s := range p.servers {
		_ = s.Close()
	}
	p.wg.Wait()
	p.router.Close()
}

// pod returns the pool's pod named name, or nil.
func (p *suitePool) pod(name string) *suitePod {
	for _, pod := range p.pods {
		if pod.name == name {
			return pod
		}
	}
	return nil
}

// suiteResult is one round trip as the suite captures it.
type suiteResult struct {
	status int
	served string // x-conformance-test-served-endpoint
	echo   echoReply
}

// send posts the suite's body to url+path with the selection header (none
// when empty).
func send(client *http.Client, url, path, selection string) (suiteResult, error) {
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(suiteBody))
	if err != nil {
		return suiteResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if selection != "" {
		req.Header.Set(ConformanceSelectionHeader, selection)
	}
	resp, err := client.Do(req)
	if err != nil {
		return suiteResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return suiteResult{}, err
	}
	res := suiteResult{status: resp.StatusCode, served: resp.Header.Get(ConformanceServedHeader)}
	if resp.StatusCode != http.StatusOK {
		return res, errors.New("status " + resp.Status + ": " + string(b))
	}
	if err := json.Unmarshal(b, &res.echo); err != nil {
		return res, err
	}
	return res, nil
}

// sendMany sends total requests, concurrency at a time (the suite's 100 and
// 10), and checks each result with check.
func sendMany(t *testing.T, client *http.Client, url, path, selection string, total, concurrency int, check func(suiteResult) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, concurrency)
	)
	for range total {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := send(client, url, path, selection)
			if err == nil {
				err = check(res)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// suitePaths are the paths each case is sent on: the suite's own (not an
// inference API path, so the picker spreads the request over the selection
// without a prompt to route by) and the completions API (routed by the
// router, with its fallbacks).
func suitePaths(suitePath string) map[string]string {
	return map[string]string{"suite path": suitePath, "completions": "/v1/completions"}
}
