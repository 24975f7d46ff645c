package connwatch_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvroute/kvroute/internal/connwatch"
)

// A server watched by a Watcher counts the request net/http refuses before
// any handler sees it.
func Example() {
	w := connwatch.New(
		prometheus.CounterOpts{Name: "example_header_timeouts_total", Help: "Connections closed before a request header arrived."},
		prometheus.CounterOpts{Name: "example_refused_requests_total", Help: "Requests net/http answered itself."},
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(w.Install(srv, ln))
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	_, _ = io.WriteString(c, "NOT A REQUEST\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		panic(err)
	}
	_ = resp.Body.Close()
	_ = c.Close()
	_ = srv.Close()
	<-done
	fmt.Println(resp.StatusCode, testutil.ToFloat64(w.Refused), testutil.ToFloat64(w.HeaderTimeouts))
	// Output: 400 1 0
}
