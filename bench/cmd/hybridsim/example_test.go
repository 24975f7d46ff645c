package main

import (
	"context"
	"fmt"
	"strings"
)

// A short run on engines with a 32-block sliding-window group and no
// Mamba group: the report's rows compare the index that drops the window
// group's events with the one that tracks every group.
func Example() {
	var out strings.Builder
	if err := run(context.Background(), []string{"-requests", "40", "-groups", "32:0"}, &out); err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| 32 : 0 |") {
			fmt.Println(line)
		}
	}
	// Output:
	// | 32 : 0 | full attention only (before) | 40 | 377.6 | 0.1553 | 8 | 0 | 8.867 | 0.020 | 617ms |
	// | 32 : 0 | every cache group (after) | 40 | 275.2 | 0.1132 | 6 | 0 | 6.733 | 0.020 | 617ms |
}
