// Package apierror writes the error bodies kvroute's HTTP-facing components
// (the gateway, the Envoy picker's immediate responses) answer a request
// with, in the shape the request's API uses, as the engine behind them
// answers its own errors: Anthropic's {"type":"error","error":{"type",
// "message"}} for the Messages API, vLLM's OpenAI {"error":{"message",
// "type","param","code"}} for every other path. A client's SDK reads the
// error's type from that shape, so an answer in the other API's shape loses
// it.
package apierror
