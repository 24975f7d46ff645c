package main

import (
	"context"
	"fmt"
	"strings"
)

// A short run on engines of 256 blocks that full attention, the window
// group and the Mamba group share: the report's rows compare the index
// that drops the window and Mamba groups' events with the one that tracks
// every group.
func Example() {
	var out strings.Builder
	if err := run(context.Background(), []string{"-requests", "40", "-pools", "256"}, &out); err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| 256 |") {
			fmt.Println(line)
		}
	}
	// Output:
	// | 256 | full attention only (before) | 40 | 272.0 | 0.1118 | 3 | 2 | 1.137 | 0.154 | 3.811s |
	// | 256 | every cache group (after) | 40 | 212.8 | 0.0875 | 2 | 2 | 0.979 | 0.154 | 3.811s |
}
