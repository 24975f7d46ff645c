// Package leakcheck verifies that a test leaves no goroutine behind, with
// go.uber.org/goleak (a test-only dependency: only test binaries import this
// package) doing the work.
//
// kvroute promises that every component with a background loop stops all of
// its goroutines when it is closed. Tests prove it with
//
//	defer leakcheck.Check(t)()
//
// taken before the component is created: the returned function waits (boundedly)
// until every goroutine that did not exist at the snapshot has exited, and fails
// the test with the stacks of the survivors otherwise. Goroutines started by the
// Go runtime and the testing package are ignored, and so are idle HTTP
// keep-alive connections and the os/signal loop. Tests that use it must not call
// t.Parallel, because goroutines of a parallel test would be counted as leaks.
package leakcheck
