package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

func main() {
	model := flag.String("model", "sim-model", "base model name the engines serve")
	list := flag.String("endpoints", "127.0.0.1:8001,127.0.0.2:8002", "the engines' ip:port, comma-separated")
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on")
	eventsPort := flag.Int("events-port", kvevents.DefaultEventsPort, "the engines' KV-event PUB port")
	replayPort := flag.Int("replay-port", kvevents.DefaultReplayPort, "the engines' KV-event replay port")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt) // Ctrl-C stops the gateway
	defer stop()
	cfg := kvroute.DefaultConfig() // 64-token blocks, KV events with replay, the affinity filter's defaults
	cfg.Model = *model
	cfg.Events.EventsPort, cfg.Events.ReplayPort = *eventsPort, *replayPort
	router, err := kvroute.New(ctx, cfg, kvroute.Options{Set: telemetry.Set{Registerer: prometheus.DefaultRegisterer, Logger: slog.Default()}})
	if err != nil {
		log.Fatal(err)
	}
	defer router.Close()
	var endpoints []kvroute.Endpoint
	for _, id := range strings.Split(*list, ",") {
		endpoints = append(endpoints, kvroute.Endpoint{ID: id})
	}
	// Subscribe to every engine's KV events and render prompts on them.
	if err := router.SetEndpoints(endpoints); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.HandleFunc("POST /v1/", func(w http.ResponseWriter, r *http.Request) {
		api, ok := render.APIForPath(r.URL.Path) // /v1/chat/completions → APIChatCompletions, ...
		if !ok {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d, err := router.Pick(r.Context(), &kvroute.Request{API: api, Body: body, Header: r.Header}, endpoints)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer d.Done(kvroute.DoneInfo{}) // the response ended, failed or was aborted: release the request's load
		target, _ := url.Parse(d.Endpoint.URL())
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1 // stream server-sent events as they arrive
		proxy.ModifyResponse = func(resp *http.Response) error {
			resp.Header.Set("X-Kvroute-Endpoint", d.Endpoint.ID)
			resp.Header.Set("X-Kvroute-Cached-Tokens", strconv.Itoa(d.CachedTokens))
			resp.Body = firstChunk{resp.Body, d}
			return nil
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		proxy.ServeHTTP(w, r)
	})

	// A client that never finishes its header, or leaves a keep-alive
	// connection idle, would otherwise hold a socket and a goroutine for as
	// long as it likes. No write timeout: a streamed answer may take minutes.
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	shutdown := make(chan error, 1)
	go func() {
		<-ctx.Done()
		stop() // from now on a second Ctrl-C stops the process at once
		log.Print("stopping: finishing the answers in flight (Ctrl-C again to cut them)")
		shutdown <- srv.Shutdown(context.Background())
	}()
	log.Printf("quickstart gateway on http://%s, model %q, endpoints %s", *listen, *model, *list)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	// Shutdown returns once the requests in flight have ended, or with the
	// error that kept it from closing the listener or a connection.
	if err := <-shutdown; err != nil {
		log.Fatalf("shutdown: %v", err)
	}
}

// firstChunk calls Decision.FirstChunk when the first response bytes arrive:
// the engine has finished the prompt's prefill.
type firstChunk struct {
	io.ReadCloser
	d *kvroute.Decision
}

func (f firstChunk) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 {
		f.d.FirstChunk() // idempotent: only the first call counts
	}
	return n, err
}
