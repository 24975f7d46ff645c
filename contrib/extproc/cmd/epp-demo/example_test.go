package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
)

// A burst of three requests sharing a system prompt, through the picker
// and the Envoy-behaving proxy, all served by one engine. The engines'
// loopback ports change from run to run, so the example prints the
// demo's closing line with the address masked.
func Example() {
	var out bytes.Buffer
	if err := run(context.Background(), &out, 3); err != nil {
		fmt.Println(err)
		return
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println(regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(lines[len(lines)-1], "ENGINE"))
	// Output: 3 of 3 requests on ENGINE, the engine that cached the shared prompt first
}
