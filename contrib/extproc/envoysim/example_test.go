package envoysim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
)

// unreachablePicker is an endpoint picker Envoy cannot reach: every
// ext_proc stream fails to open.
type unreachablePicker struct{}

// Process fails as a stream to an unreachable picker does.
func (unreachablePicker) Process(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse], error) {
	return nil, errors.New("connection refused")
}

// With FailOpen the proxy behaves as Envoy's ext_proc filter with
// failure_mode_allow: a request whose picker cannot be reached goes to
// one of the pool's endpoints without a pick. Without it, such a request
// is answered 500.
func Example_failOpen() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "engine served %s", r.URL.Path)
	}))
	defer engine.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	for _, cfg := range []envoysim.Config{{FailOpen: []string{engine.Listener.Addr().String()}}, {}} {
		proxy := httptest.NewServer(envoysim.New(cfg, unreachablePicker{}, client))
		resp, err := client.Post(proxy.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hello"}`))
		if err != nil {
			fmt.Println(err)
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
		}
		proxy.Close()
	}
	// Output:
	// 200 engine served /v1/completions
	// 500 ext_proc: connection refused
}
