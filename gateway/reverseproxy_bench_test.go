package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// cpuNow is the process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var allocSample = []rtmetrics.Sample{{Name: "/gc/heap/allocs:objects"}}

// allocsNow is the number of heap objects allocated so far.
func allocsNow() uint64 {
	rtmetrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// proxyVariant is one way to reach the engines: directly, or through a proxy
// served on its own loopback listener.
type proxyVariant struct {
	name  string
	urls  func(i int64) string // the URL of request i
	check func(*http.Response) error
	cpu   time.Duration
	alloc uint64
	n     int64
}

// BenchmarkGatewayVsReverseProxy forwards the same completions requests
// (2,000-token prompts with a shared prefix, max_tokens 1, 16 concurrent
// clients) to the same two simulated engines directly, through
// net/http/httputil.ReverseProxy (round robin over the engines, flushing
// every write as the gateway does), through kvroute's gateway routing
// without render (a Router picking by load) and through the gateway
// rendering on the engines with tokenize-once on, interleaved in batches
// within one run. Engines, clients and proxies share the process, so each
// proxy's CPU and allocations per request are its run's minus the direct
// run's: the engines serve the same requests in every variant, and the
// clients' work is the same whether they talk to an engine or a proxy. It
// reports x-reverse-proxy, the gateway's CPU per request without render over
// ReverseProxy's (the target is at most 1.5), x-reverse-proxy-render the
// same with render (the engines' render work counts as the gateway's), the
// CPU per request of each proxy and the allocations each adds per request.
func BenchmarkGatewayVsReverseProxy(b *testing.B) {
	const conc, batch = 16, 128
	var engines []*url.URL
	var eps []kvroute.Endpoint
	for range 2 {
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 8192, PrefillTokensPerSecond: 1e9, DecodeStep: 20 * time.Microsecond}}, server.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		b.Cleanup(func() { _ = srv.Close() })
		engines = append(engines, &url.URL{Scheme: "http", Host: ln.Addr().String()})
		eps = append(eps, kvroute.Endpoint{ID: ln.Addr().String()})
	}

	var rr atomic.Uint64
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(engines[rr.Add(1)%uint64(len(engines))])
			pr.SetXForwarded()
		},
		Transport:     &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true},
		FlushInterval: -1,
	}
	rpSrv := httptest.NewServer(rp)
	b.Cleanup(rpSrv.Close)

	gateway := func(renderOn bool) *httptest.Server {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.BlockSize = 16
		cfg.Events.Enabled = new(false)
		cfg.DisableRender = !renderOn
		r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.SetEndpoints(eps); err != nil {
			b.Fatal(err)
		}
		pcfg := Config{Model: testModel}
		if renderOn {
			pcfg.TokenizeOnce = []render.API{render.APICompletions}
		}
		h, err := New(pcfg, r, Options{})
		if err != nil {
			b.Fatal(err)
		}
		h.SetEndpoints(eps)
		s := httptest.NewServer(h)
		b.Cleanup(func() { s.Close(); h.Close(); r.Close() })
		return s
	}
	gwPlain, gwRender := gateway(false), gateway(true)

	ok := func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	rendered := func(resp *http.Response) error {
		if err := ok(resp); err != nil {
			return err
		}
		if resp.Header.Get(HeaderPromptTokens) == "0" {
			return fmt.Errorf("the gateway did not render the prompt")
		}
		return nil
	}
	at := func(base string) func(int64) string {
		return func(int64) string { return base + "/v1/completions" }
	}
	variants := []*proxyVariant{
		{name: "direct", urls: func(i int64) string { return engines[i%int64(len(engines))].String() + "/v1/completions" }, check: ok},
		{name: "reverse-proxy", urls: at(rpSrv.URL), check: ok},
		{name: "gateway", urls: at(gwPlain.URL), check: ok},
		{name: "gateway-render", urls: at(gwRender.URL), check: rendered},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}}
	b.Cleanup(client.CloseIdleConnections)
	var seq atomic.Int64
	run := func(v *proxyVariant) {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(batch)
		c0, a0 := cpuNow(), allocsNow()
		for range conc {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					i := seq.Add(1)
					body, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 1, "prompt": churnPrompt(2000, int(i))})
					resp, err := client.Post(v.urls(i), "application/json", strings.NewReader(string(body)))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err := v.check(resp); err != nil {
						b.Errorf("%s: %v", v.name, err)
						return
					}
				}
			})
		}
		wg.Wait()
		v.cpu += cpuNow() - c0
		v.alloc += allocsNow() - a0
		v.n += batch
	}
	for _, v := range variants { // warm the pools and the engines' caches
		run(v)
		v.cpu, v.alloc, v.n = 0, 0, 0
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range variants { // the order rotates, so no variant always follows another
			run(variants[(i+j)%len(variants)])
		}
	}
	perReq := func(v *proxyVariant) (cpu, alloc float64) {
		return float64(v.cpu.Nanoseconds()) / float64(v.n), float64(v.alloc) / float64(v.n)
	}
	dc, da := perReq(variants[0])
	over := map[string][2]float64{}
	for _, v := range variants[1:] {
		c, a := perReq(v)
		over[v.name] = [2]float64{c - dc, a - da}
		b.ReportMetric((c-dc)/1e3, v.name+"-µs-cpu/req")
		b.ReportMetric(a-da, v.name+"-allocs/req")
	}
	b.ReportMetric(dc/1e3, "direct-µs-cpu/req")
	if rpc := over["reverse-proxy"][0]; rpc > 0 {
		b.ReportMetric(over["gateway"][0]/rpc, "x-reverse-proxy")
		b.ReportMetric(over["gateway-render"][0]/rpc, "x-reverse-proxy-render")
	}
}
