package clockctx_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/telemetry"
)

// The context ends when the clock, not wall time, has moved the timeout
// forward, with context.DeadlineExceeded as context.WithTimeout's would.
func ExampleWithTimeout() {
	clk := telemetry.NewManual(time.Unix(0, 0))
	ctx, cancel := clockctx.WithTimeout(context.Background(), clk, time.Hour)
	defer cancel()
	clk.Advance(time.Hour - time.Second)
	fmt.Println(ctx.Err())
	clk.Advance(time.Second)
	<-ctx.Done()
	fmt.Println(ctx.Err(), clk.Waiters())
	// Output:
	// <nil>
	// context deadline exceeded 0
}

// Sleep ends early, reporting false, when its context ends first.
func ExampleSleep() {
	clk := telemetry.NewManual(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- clockctx.Sleep(ctx, clk, time.Minute) }()
	clk.WaitForWaiters(1)
	cancel()
	fmt.Println(<-done, clk.Waiters())
	// Output: false 0
}
