package sidecar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/kvroute/kvroute/disagg/sidecar"
)

// A gateway running the two-step exchange itself: Prefill asks the
// prefiller for one token and the transfer parameters, and returns the body
// to send to the decode endpoint.
func Example() {
	prefiller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		fmt.Println("prefiller got max_tokens", req["max_tokens"], "stream", req["stream"])
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"text":"Hi"}],"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"p0","remote_block_ids":[7,8],"remote_host":"10.0.0.5","remote_port":5600,"tp_size":1}}`)
	}))
	defer prefiller.Close()

	x, err := sidecar.NewExchange(sidecar.Config{}, sidecar.Options{})
	if err != nil {
		panic(err)
	}
	defer x.Close()
	body := []byte(`{"model":"m","prompt":"Hello","max_tokens":64,"stream":true}`)
	hostPort := strings.TrimPrefix(prefiller.URL, "http://")
	res, err := x.Prefill(context.Background(), hostPort, "/v1/completions", http.Header{"X-Request-Id": {"req-1"}}, body)
	if err != nil {
		panic(err)
	}
	fmt.Println("split:", res.Split, "request id:", res.RequestID)
	fmt.Println("decode body:", string(res.DecodeBody))
	// Output:
	// prefiller got max_tokens 1 stream false
	// split: true request id: req-1
	// decode body: {"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"p0","remote_block_ids":[7,8],"remote_host":"10.0.0.5","remote_port":5600,"tp_size":1},"max_tokens":64,"model":"m","prompt":"Hello","stream":true}
}
