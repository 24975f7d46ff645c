package sidecar

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// lateReadTransport is a decoder's transport that behaves as net/http's
// Transport can on a busy machine: it reads the request body's declared
// length and answers a streamed response, and only once the test releases
// it reads the body once more, as net/http's connection writer does after
// the declared length (to check for extra bytes) before it closes the body.
// A read error there makes net/http close the connection under the
// response being streamed; lateReadTransport then breaks the response off
// the same way.
type lateReadTransport struct {
	release chan struct{} // closed by the test: do the late read
	late    chan error    // the late read's error (nil: io.EOF, as it must be)
	done    chan struct{} // closed when the response writer goroutine ends
}

func (lt *lateReadTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := io.ReadFull(req.Body, make([]byte, req.ContentLength)); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer close(lt.done)
		select {
		case <-lt.release:
		case <-req.Context().Done():
			_ = pw.CloseWithError(req.Context().Err())
			return
		}
		n, err := req.Body.Read(make([]byte, 1))
		if n == 0 && errors.Is(err, io.EOF) {
			err = nil
		}
		_ = req.Body.Close()
		lt.late <- err
		if err != nil {
			_ = pw.CloseWithError(err) // net/http closes the connection
			return
		}
		_, _ = io.WriteString(pw, "data: [DONE]\n\n")
		_ = pw.Close()
	}()
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, ContentLength: -1, Request: req}, nil
}

// A request the sidecar proxies as it came (no prefiller named) must reach
// the decoder's transport with a body the sidecar's own HTTP server cannot
// take away. net/http's server consumes and closes a request body once the
// handler's response header goes out, and net/http's Transport may read
// the body it was given again after the decoder has already answered (its
// check for bytes past the declared length): were that the client's body,
// the late read fails, the Transport closes the decoder connection, and the
// stream already under way breaks off (the client reads an unexpected EOF).
// Here the late read happens, deterministically, only after the client has
// received the response header: it must see io.EOF and the stream must end
// whole.
func TestSidecarPlainRequestBodyOutlivesTheResponseHeader(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	lt := &lateReadTransport{release: make(chan struct{}), late: make(chan error, 1), done: make(chan struct{})}
	h, err := NewHandler(Config{DecoderURL: "http://127.0.0.1:1"}, Options{Client: &http.Client{Transport: lt}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)

	// Past the server's 4 KiB read buffer, so that the decoder reads
	// from the connection as net/http's Transport writes to it.
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 16<<10) + `"}]}`)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	close(lt.release) // the header is out: the sidecar's server has done with the client's body
	require.NoError(t, <-lt.late, "the decoder's transport reads the body after the response header")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends whole")
	require.Equal(t, "data: [DONE]\n\n", string(b))
	<-lt.done
}
