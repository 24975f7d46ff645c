package main

import (
	"context"
	"fmt"
	"strings"
)

// A short run on engines with a 64-block sliding-window group and no
// Mamba group: the report's rows compare the index that drops the window
// group's events with the one that tracks every group.
func Example() {
	var out strings.Builder
	if err := run(context.Background(), []string{"-requests", "30", "-groups", "64:0"}, &out); err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| 64 : 0 |") {
			fmt.Println(line)
		}
	}
	// Output:
	// | 64 : 0 | full attention only (before) | 30 | 147.2 | 0.0605 | 0 | 2 | 0.650 | 0.173 | 484ms |
	// | 64 : 0 | every cache group (after) | 30 | 147.2 | 0.0605 | 0 | 2 | 0.582 | 0.145 | 496ms |
}
