package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
)

// A gateway in front of one engine: the Handler asks the Router where the
// request goes, forwards it, and names the endpoint in a response header.
func ExampleHandler() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"choices":[{"text":" world"}]}`)
	}))
	defer engine.Close()
	id := strings.TrimPrefix(engine.URL, "http://") // ip:port, as in the engine's KV-event topic

	cfg := kvroute.DefaultConfig()
	cfg.Model = "demo-model"
	cfg.Events.Enabled = new(false) // no KV events in this example: routing by load alone
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		panic(err)
	}
	defer router.Close()
	h, err := gateway.New(gateway.Config{Model: cfg.Model}, router, gateway.Options{})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	eps := []kvroute.Endpoint{{ID: id}}
	if err := router.SetEndpoints(eps); err != nil {
		panic(err)
	}
	h.SetEndpoints(eps)
	gw := httptest.NewServer(h)
	defer gw.Close()

	resp, err := http.Post(gw.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"demo-model","prompt":"Hello"}`))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get(gateway.HeaderEndpoint) == id)
	fmt.Println(string(body))
	// The handler releases the request's load just after the client has
	// read the last byte, so wait (boundedly) for that release.
	_, inflight, _ := router.Load().Load(id)
	for deadline := time.Now().Add(10 * time.Second); inflight != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		_, inflight, _ = router.Load().Load(id)
	}
	fmt.Println("requests in flight:", inflight)
	// Output:
	// 200 true
	// {"choices":[{"text":" world"}]}
	// requests in flight: 0
}
