package routertest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/internal/routertest"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

// printT stands in for the *testing.T of a server's test: it prints what
// the check reports.
type printT struct{}

func (printT) Helper()                           {}
func (printT) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }
func (printT) FailNow()                          { panic("check failed") }

// An echo server with one connection slot and a short idle timeout passes
// the check with a client that retries until it is served.
func ExampleSilentPeersClosedAsIdle() {
	var counts zmqx.ServerCounts
	srv, err := zmqx.ServeRouter(zmqx.RouterConfig{Addr: "127.0.0.1:0", MaxConns: 1, Name: "echo",
		Options: zmqx.Options{IdleTimeout: 200 * time.Millisecond}}, &counts, nil,
		func(c *zmqx.Conn) zmqx.ConnHandler {
			return zmqx.ConnHandler{Message: func(frames [][]byte) error { return c.WriteMsg(frames...) }}
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	echo := func(ctx context.Context) error { // the server's own client
		for {
			d := zmqx.NewDealer(ctx, zmqx.Options{IdleTimeout: time.Second}, nil)
			err := zmqx.Dial(d, srv.Endpoint())
			if err == nil {
				err = d.Send(zmq4.NewMsgFrom([]byte{}, []byte("ping")))
			}
			if err == nil {
				_, _, err = zmqx.Recv(d)
			}
			_ = zmqx.CloseDrain(d)
			if err == nil || !clockctx.Sleep(ctx, telemetry.Wall, 10*time.Millisecond) {
				return err
			}
		}
	}
	routertest.SilentPeersClosedAsIdle(printT{}, routertest.Server{Endpoint: srv.Endpoint(), Open: srv.Open,
		Idle: counts.Idle.Load, Stats: func() any { return counts.Idle.Load() }}, 1, echo)
	// The served client's own connection may be closed as idle too on a
	// busy machine, if its close comes late.
	fmt.Println("served; the silent peer closed as idle:", counts.Idle.Load() >= 1)
	// Output: served; the silent peer closed as idle: true
}
