// Package bytebudget bounds the bytes that many requests hold together: the
// request bodies the kvroute gateway, the ext_proc endpoint picker and the
// P/D sidecar buffer at once. A Budget is a counter, not a queue: a request that finds
// no room is refused at once rather than made to wait while it holds a
// connection or a stream.
package bytebudget
