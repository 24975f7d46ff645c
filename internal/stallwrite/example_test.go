package stallwrite_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/kvroute/kvroute/internal/stallwrite"
)

// A handler writes its response through a Writer: each write may wait a
// minute for the client, and a cut response is told apart from other
// write errors by Stalled.
func ExampleStart() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sw := stallwrite.Start(w, time.Minute)
		defer sw.Stop()
		if _, err := sw.Write([]byte("snapshot bytes")); stallwrite.Stalled(err) {
			return // the client stopped reading: count it and let go
		}
		_ = sw.Flush()
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(string(b))
	// Output: snapshot bytes
}
