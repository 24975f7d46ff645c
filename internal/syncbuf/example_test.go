package syncbuf_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/kvroute/kvroute/internal/syncbuf"
)

// A logger writes from several goroutines while the buffer is read.
func Example() {
	var logs syncbuf.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { lg.Info("engine up", "n", i) })
	}
	wg.Wait()
	fmt.Println(strings.Count(logs.String(), "engine up"))
	// Output: 3
}
