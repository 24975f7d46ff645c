package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// simEngine is a simulated vLLM (HTTP, render routes, KV events with replay)
// on free loopback ports.
type simEngine struct {
	srv    *server.Server
	id     string
	served chan error
}

func startEngine(t *testing.T) *simEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	id := ln.Addr().String()
	replay := "tcp://127.0.0.1:0"
	srv, err := server.New(server.Config{
		Model:          testModel,
		EnableScaleOut: true,
		Engine:         simengine.Config{BlockSize: 16, DecodeStep: 20 * time.Millisecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + testModel},
	}, server.Options{})
	require.NoError(t, err)
	e := &simEngine{srv: srv, id: id, served: make(chan error, 1)}
	go func() { e.served <- srv.Serve(ln) }()
	return e
}

func (e *simEngine) close() {
	_ = e.srv.Close()
	<-e.served
}

// Two gateways (package gateway, each on its own kvroute.Router) share one
// Redis and the same two simulated engines: while streamed requests through
// both are in flight, each router's view of every engine's open requests is
// the sum of both gateways' requests there; once the streams end it is zero
// everywhere.
func TestGatewaysShareLoadOverSimulatedEngines(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	engines := []*simEngine{startEngine(t), startEngine(t)}
	defer func() {
		for _, e := range engines {
			e.close()
		}
	}()
	eps := make([]kvroute.Endpoint, len(engines))
	for i, e := range engines {
		eps[i] = kvroute.Endpoint{ID: e.id, EventsAddress: e.srv.KVEventsEndpoint(), ReplayAddress: e.srv.ReplayEndpoint()}
	}
	var gws []*gateway.Server
	for _, id := range []string{"gw-a", "gw-b"} {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.BlockSize = 16
		cfg.Cluster = fastCluster(srv.Addr, id)
		gw, err := gateway.NewServer(t.Context(), gateway.ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps}, gateway.Options{})
		require.NoError(t, err)
		gws = append(gws, gw)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, g := range gws {
			require.NoError(t, g.Shutdown(ctx))
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	started := make(chan struct{}, 8)
	for i := 0; i < 8; i++ { // 4 long streams through each gateway
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream(ctx, client, gws[i%2].URL(), fmt.Sprintf("question %d about the shared load of two gateways", i), started)
		}()
	}
	for i := 0; i < 8; i++ {
		select {
		case <-started:
		case <-time.After(waitFor):
			t.Fatal("streams did not start")
		}
	}
	routers := []*kvroute.Router{gws[0].Router(), gws[1].Router()}
	openSum := func() map[string]int64 {
		m := map[string]int64{}
		for _, e := range eps {
			for _, r := range routers {
				_, req := r.Load().LocalLoad(e.ID)
				m[e.ID] += req
			}
		}
		return m
	}
	require.Eventually(t, func() bool {
		sum := openSum()
		var total int64
		for _, e := range eps {
			total += sum[e.ID]
			for _, r := range routers {
				if _, req, _ := r.Load().Load(e.ID); req != sum[e.ID] {
					return false
				}
			}
		}
		return total == 8
	}, waitFor, 5*time.Millisecond, "each router must see both gateways' open requests: sum %v", openSum())

	cancel() // the clients go away: both gateways release their requests
	wg.Wait()
	require.Eventually(t, func() bool {
		for _, e := range eps {
			for _, r := range routers {
				if tok, req, _ := r.Load().Load(e.ID); tok != 0 || req != 0 {
					return false
				}
			}
		}
		return true
	}, waitFor, 5*time.Millisecond)
}

// stream sends one streaming chat completion with a long answer and reads
// it until ctx ends; started is signalled at the first event.
func stream(ctx context.Context, client *http.Client, base, question string, started chan<- struct{}) {
	body, _ := json.Marshal(map[string]any{"model": testModel, "stream": true, "max_tokens": 1000,
		"messages": []map[string]string{{"role": "user", "content": question}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	first := true
	for sc.Scan() {
		if first && strings.HasPrefix(sc.Text(), "data:") {
			first = false
			started <- struct{}{}
		}
	}
}
