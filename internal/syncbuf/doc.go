// Package syncbuf is a bytes.Buffer safe for concurrent use: the sink of a
// logger or a child process's output that one goroutine writes while a
// test or a supervisor reads what has arrived so far.
//
// Tests across kvroute wait for a log line or a process's output while
// another goroutine is still writing it; a plain bytes.Buffer is a data
// race there. The package adds no module dependency.
package syncbuf
