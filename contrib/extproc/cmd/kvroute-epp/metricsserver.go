package main

import (
	"net/http"
	"time"
)

// metricsServer is the HTTP server of the metrics port (/metrics, /ready
// and the status page), given the kvroute gateway's client connection
// limits (gateway.DefaultReadHeaderTimeout, gateway.DefaultIdleTimeout) by
// metricsServing.serve. It serves h, closing a connection whose client has not sent a
// request's whole header within readHeader, and a keep-alive connection
// that waits idle longer than idle for its next request. Without them every
// scraper or prober that leaves a connection open, or never finishes a
// header, would hold a socket and a goroutine of the picker for as long as
// it likes.
func metricsServer(h http.Handler, readHeader, idle time.Duration) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeader, IdleTimeout: idle}
}
