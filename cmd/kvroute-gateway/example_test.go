package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// notify calls fn with everything written to it.
type notify func(string)

func (n notify) Write(p []byte) (int, error) { n(string(p)); return len(p), nil }

// The command serves until it is interrupted; here a round-robin gateway in
// front of one (absent) engine stops as soon as it says where it serves.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := notify(func(s string) {
		if strings.Contains(s, "serving on") {
			fmt.Println("serving")
			cancel()
		}
	})
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:9", "--policy", "round-robin"}, out, io.Discard)
	fmt.Println("stopped:", err)
	// Output:
	// serving
	// stopped: <nil>
}
