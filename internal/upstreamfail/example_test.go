package upstreamfail_test

import (
	"fmt"
	"net"
	"net/http"

	"github.com/kvroute/kvroute/internal/upstreamfail"
)

// A request to a port nothing listens on fails with an error that names
// the address; the client is told the kind's fixed text instead.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/models", nil)
	_, err = tr.RoundTrip(req)
	k := upstreamfail.Classify(err)
	fmt.Println(k.String() + ": the engine " + k.Text())
	// Output: unreachable: the engine could not be reached
}
