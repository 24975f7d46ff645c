package h1pool_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/kvroute/kvroute/internal/h1pool"
)

// A Transport serves an http.Client; reading each answer to its end gives
// the connection back, so three requests in a row share one connection.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "tokens for %q", b)
	}))
	defer srv.Close()
	tr := h1pool.New(h1pool.Config{MaxConnsPerHost: 8})
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for _, prompt := range []string{"a", "b", "c"} {
		resp, err := client.Post(srv.URL+"/render", "text/plain", strings.NewReader(prompt))
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(b))
	}
	st := tr.Stats()
	fmt.Println("dials:", st.Dials, "closes:", st.Closes)
	// Output:
	// tokens for "a"
	// tokens for "b"
	// tokens for "c"
	// dials: 1 closes: [0 0 0 0]
}
