package gatewaycmd_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kvroute/kvroute/gateway/gatewaycmd"
)

// notify calls fn with everything written to it.
type notify func(string)

func (n notify) Write(p []byte) (int, error) { n(string(p)); return len(p), nil }

// Run serves the gateway until its context ends; here it stops as soon as it
// says where it serves.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := notify(func(s string) {
		if strings.Contains(s, "serving on") {
			fmt.Println("serving")
			cancel()
		}
	})
	err := gatewaycmd.Run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:9", "--policy", "round-robin"},
		out, io.Discard, gatewaycmd.Options{})
	fmt.Println("stopped:", err)
	// Output:
	// serving
	// stopped: <nil>
}
