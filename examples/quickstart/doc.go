// Command quickstart is the smallest gateway on a kvroute.Router: it routes
// each OpenAI or Anthropic request to the engine holding the longest cached
// prefix of its prompt and proxies the response. The README shows its
// main.go whole.
package main
