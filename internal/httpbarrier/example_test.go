package httpbarrier_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/kvroute/kvroute/internal/httpbarrier"
)

// Two requests at once need two connections: neither is answered until
// both have arrived.
func Example() {
	srv := httpbarrier.New(2, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				panic(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		})
	}
	wg.Wait()
	fmt.Println("connections:", srv.Accepted())
	// Output: connections: 2
}
