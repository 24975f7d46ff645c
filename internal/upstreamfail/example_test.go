package upstreamfail_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/internal/upstreamfail"
)

// A request to a port nothing listens on fails with an error that names
// the address; the client is told the kind's fixed text instead. The port
// comes from testport, outside the ephemeral range, where no other socket's
// bind to port 0 can take it and answer while the example runs.
func Example() {
	port, err := testport.Find(testport.Options{})
	if err != nil {
		panic(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	tr := &http.Transport{DisableKeepAlives: true}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/models", nil)
	_, err = tr.RoundTrip(req)
	k := upstreamfail.Classify(err)
	fmt.Println(k.String() + ": the engine " + k.Text())
	// Output: unreachable: the engine could not be reached
}
