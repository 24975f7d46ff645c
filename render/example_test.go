package render_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// Example renders a chat request through two vLLM renderers. The httptest
// server stands in for `vllm serve --enable-scale-out`; the second endpoint
// answers like a vLLM started without the flag: a render sent there is
// retried on the first, and the second is passed over for a while. Alone,
// it cannot render.
func Example() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"request_id":"chatcmpl-1","token_ids":[151644,872,198,9707,151645],"features":null,"cache_salt":null,"sampling_params":{"max_tokens":1}}`)
	}))
	defer engine.Close()
	noFlag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	}))
	defer noFlag.Close()

	cfg := render.DefaultConfig()
	cfg.ModelName = "Qwen/Qwen3-8B"
	client, err := render.New(cfg, render.Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if err := client.SetEndpoints([]render.Endpoint{
		{ID: "10.0.0.1:8000", URL: engine.URL},
		{ID: "10.0.0.2:8000", URL: noFlag.URL},
	}); err != nil {
		panic(err)
	}

	req := &render.Request{
		API:           render.APIChatCompletions,
		Body:          []byte(`{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"Hello"}]}`),
		Authorization: "Bearer sk-example",
	}
	for i := range 3 {
		if i == 2 {
			if err := client.SetEndpoints([]render.Endpoint{{ID: "10.0.0.2:8000", URL: noFlag.URL}}); err != nil {
				panic(err)
			}
		}
		res, err := client.Render(context.Background(), req)
		var rerr *render.Error
		switch {
		case errors.As(err, &rerr) && errors.Is(err, render.ErrRenderNotEnabled):
			fmt.Println(rerr.Endpoint, "has render disabled; status", rerr.Status)
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Println(res.Endpoint, "rendered", res.Prompts[0].TokenIDs)
		}
	}
	// Output:
	// 10.0.0.1:8000 rendered [151644 872 198 9707 151645]
	// 10.0.0.1:8000 rendered [151644 872 198 9707 151645]
	// 10.0.0.2:8000 has render disabled; status 404
}

// ExampleCheck verifies that every engine serves the render routes.
func ExampleCheck() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"request_id":"cmpl-1","token_ids":[9707,11,1879,0],"features":null}]`)
	}))
	defer engine.Close()
	results, err := render.Check(context.Background(),
		[]render.Endpoint{{ID: "10.0.0.1:8000", URL: engine.URL}},
		render.CheckOptions{Model: "Qwen/Qwen3-8B"})
	fmt.Println("all passed:", err == nil)
	for _, r := range results {
		fmt.Println(r.Endpoint.ID, r.OK(), r.Tokens)
	}
	// Output:
	// all passed: true
	// 10.0.0.1:8000 true 4
}
