package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// Example starts a simulated vLLM server in-process on a free port, renders a
// chat request as a router would, and runs it.
func Example() {
	srv, err := server.New(server.Config{
		Model:          "sim-model",
		EnableScaleOut: true,
		Engine:         simengine.Config{DecodeStep: time.Millisecond},
	}, server.Options{})

	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.Start("127.0.0.1:0"); err != nil {
		panic(err)
	}
	base := "http://" + srv.Addr()

	body := []byte(`{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"Hello!"}]}`)
	resp, err := http.Post(base+"/v1/chat/completions/render", "application/json", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	var rendered struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&rendered)
	resp.Body.Close()
	fmt.Println("rendered tokens:", len(rendered.TokenIDs))

	resp, err = http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	var out struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	fmt.Println("prompt tokens:", out.Usage.PromptTokens, "completion tokens:", out.Usage.CompletionTokens)
	// Output:
	// rendered tokens: 5
	// prompt tokens: 5 completion tokens: 3
}
