package extproc_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
)

// The picker serves Envoy's ext_proc stream on a gRPC server and routes
// with a kvroute.Router. Here envoysim plays Envoy in front of one engine
// (an HTTP server on loopback standing in for vLLM): the picker names the
// engine in x-gateway-destination-endpoint, Envoy forwards the request
// there, and the answer comes back with the pick in x-kvroute-endpoint.
func Example() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "engine served %s", r.URL.Path)
	}))
	defer engine.Close()
	eps := []kvroute.Endpoint{{ID: engine.Listener.Addr().String()}}

	cfg := kvroute.DefaultConfig()
	cfg.Model = "sim-model"
	cfg.Events.Enabled = new(false) // the stand-in engine publishes no KV events
	cfg.DisableRender = true        // and renders nothing
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer router.Close()
	if err := router.SetEndpoints(eps); err != nil {
		fmt.Println(err)
		return
	}
	picker, err := extproc.New(extproc.Config{Model: "sim-model"}, router, extproc.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer picker.Close()
	picker.SetEndpoints(eps)
	picker.SetReady(true)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	gs := grpc.NewServer()
	picker.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), nil))
	defer envoy.Close()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(envoy.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"sim-model","prompt":"hello","max_tokens":4}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println("picked the engine:", resp.Header.Get(extproc.EndpointHeader) == eps[0].ID)
	// Output:
	// 200 engine served /v1/completions
	// picked the engine: true
}
