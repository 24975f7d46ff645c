package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/h1pool"
)

// exchangeFront is the round-robin-exchange target's front: before handing
// a request to the gateway's proxy (its round-robin Handler, no render, no
// routing), it makes one bodiless HTTP exchange with an engine (GET /health,
// the engines taken in turn) on kvroute's own client transport, and reads
// the answer to its end.
//
// It is a floor, not a policy: any gateway that tokenizes on the engines
// does at least this per request — the proxy hop and one more exchange with
// an engine — and a real render exchange also carries the prompt up and its
// token IDs down, which this one does not. So in one run, precise-once's
// rate against direct cannot exceed this target's by more than the rounds'
// noise, whatever kvroute's routing costs.
type exchangeFront struct {
	next    http.Handler
	client  *http.Client
	targets []string // each engine's health URL
	turn    atomic.Uint64
}

// newExchangeFront returns the front for the engines eps before next.
func newExchangeFront(next http.Handler, eps []kvroute.Endpoint) *exchangeFront {
	f := &exchangeFront{next: next, client: &http.Client{Transport: h1pool.New(h1pool.Config{})}}
	for _, e := range eps {
		f.targets = append(f.targets, "http://"+e.ID+"/health")
	}
	return f
}

func (f *exchangeFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	url := f.targets[f.turn.Add(1)%uint64(len(f.targets))]
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, url, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = f.client.Do(req); err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s answered %s", url, resp.Status)
			}
		}
	}
	if err != nil {
		http.Error(w, "exchange: "+err.Error(), http.StatusBadGateway)
		return
	}
	f.next.ServeHTTP(w, r)
}

// serveExchangeFront serves h on a loopback listener until the returned
// stop is called, and returns its URL.
func serveExchangeFront(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
