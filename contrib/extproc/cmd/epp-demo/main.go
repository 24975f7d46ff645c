package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

const model = "sim-model"

func main() {
	burst, err := parseFlags(os.Args[1:], os.Stdout)
	if err == nil {
		err = run(context.Background(), os.Stdout, burst)
	}
	cliflag.Exit("epp-demo", err)
}

// parseFlags reads the command line: the burst's size.
func parseFlags(args []string, stdout io.Writer) (burst int, err error) {
	fs := flag.NewFlagSet("epp-demo", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: epp-demo [-burst N]

Starts two simulated vLLM engines, kvroute's ext_proc picker and an
Envoy-behaving proxy on loopback ports, sends a burst of requests that share
a long system prompt through the proxy, prints the engine that served each,
and stops everything. It fails unless the burst stays on one engine.

`)
		fs.PrintDefaults()
	}
	fs.IntVar(&burst, "burst", 8, "requests in the burst (at least 2)")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if burst < 2 {
		return 0, fmt.Errorf("-burst %d: at least 2 requests make a burst", burst)
	}
	return burst, nil
}

type engineProc struct {
	srv    *server.Server
	id     string
	served chan error
}

func startEngine() (*engineProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	id := ln.Addr().String()
	replay := "tcp://127.0.0.1:0"
	srv, err := server.New(server.Config{
		Model: model, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 1024, PrefillTokensPerSecond: 100_000, DecodeStep: time.Millisecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + model},
	}, server.Options{})

	if err != nil {
		ln.Close()
		return nil, err
	}
	e := &engineProc{srv: srv, id: id, served: make(chan error, 1)}
	go func() { e.served <- srv.Serve(ln) }()
	return e, nil
}

// run starts everything, sends burst requests through the proxy, prints a
// line per request and a summary, and stops everything it started. It fails
// unless the burst after the first request stayed on one engine.
func run(ctx context.Context, out io.Writer, burst int) (err error) {
	var engines []*engineProc
	defer func() {
		for _, e := range engines {
			_ = e.srv.Close()
			<-e.served
		}
	}()
	var eps []kvroute.Endpoint
	for range 2 {
		e, err := startEngine()
		if err != nil {
			return err
		}
		engines = append(engines, e)
		eps = append(eps, kvroute.Endpoint{ID: e.id, EventsAddress: e.srv.KVEventsEndpoint(), ReplayAddress: e.srv.ReplayEndpoint()})
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = model
	router, err := kvroute.New(ctx, cfg, kvroute.Options{})
	if err != nil {
		return err
	}
	defer router.Close()
	if err := router.SetEndpoints(eps); err != nil {
		return err
	}
	picker, err := extproc.New(extproc.Config{Model: model}, router, extproc.Options{})
	if err != nil {
		return err
	}
	picker.SetEndpoints(eps)
	picker.SetReady(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	picker.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	upstream := &http.Client{Transport: &http.Transport{}}
	defer upstream.CloseIdleConnections()
	envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), upstream))
	defer envoy.Close()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	fmt.Fprintf(out, "engines %s and %s; picker on %s (ext_proc); Envoy-behaving proxy on %s\n\n",
		engines[0].id, engines[1].id, ln.Addr(), envoy.URL)
	system := strings.Repeat("You are a careful assistant who answers in full sentences. ", 60)
	served := map[string]int{}
	first := ""
	for i := range burst {
		body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 4,
			"prompt": fmt.Sprintf("%sQuestion %d: what is %d + %d?", system, i+1, i, i)})
		resp, err := client.Post(envoy.URL+"/v1/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d: status %d", i+1, resp.StatusCode)
		}
		ep := resp.Header.Get(extproc.EndpointHeader)
		served[ep]++
		fmt.Fprintf(out, "  request %2d/%d -> %s\n", i+1, burst, ep)
		if i == 0 {
			first = ep
			// Let the engine's KV events reach the index, so that what keeps
			// the burst together is the index, not only the speculative entry.
			deadline := time.Now().Add(10 * time.Second)
			for router.Index().Stats().Memberships == 0 && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}
	fmt.Fprintf(out, "\n%d of %d requests on %s, the engine that cached the shared prompt first\n", served[first], burst, first)
	if served[first] != burst {
		return errors.New("the burst left the warm engine")
	}
	return nil
}
