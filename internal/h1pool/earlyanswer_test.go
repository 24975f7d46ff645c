package h1pool

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// failingBody gives a first chunk larger than the transport's write buffer
// (so the request header reaches the server), then, once answered is
// closed (the server has sent its early answer), fails: a client's upload
// that breaks off after the server answered.
type failingBody struct {
	first    bool
	answered <-chan struct{}
}

func (b *failingBody) Read(p []byte) (int, error) {
	if !b.first {
		b.first = true
		return copy(p, strings.Repeat("p", len(p))), nil
	}
	select {
	case <-b.answered:
	case <-time.After(wait):
	}
	return 0, errors.New("the upload broke off")
}

// An early answer to a request whose write failed is read within a short
// deadline (the server may have answered and stopped reading); that
// deadline is cleared once the answer's header is in, so its body may come
// as slowly as any other: the rest of the body sent after the deadline
// would have passed is read, not cut off with a timeout.
func TestTransportEarlyAnswerBodyOutlivesTheHeaderDeadline(t *testing.T) {
	defer leakcheck.Check(t)()
	answered, rest := make(chan struct{}), make(chan struct{})
	e := newRawServer(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo ")
		close(answered)
		select {
		case <-rest:
		case <-time.After(wait):
		}
		_, _ = io.WriteString(c, "much")
	})
	defer e.close()
	tr := New(Config{})
	defer tr.Close()

	req, err := http.NewRequest(http.MethodPost, "http://"+e.hostPort()+"/v1/x", &failingBody{answered: answered})
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err, "the early answer is passed on")
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	// The header's deadline, set after the write failed and so before
	// RoundTrip returned, has passed by then: had it stayed, the read of
	// the rest would fail at once. The wait is for that deadline, a socket's
	// wall-clock one, not for another goroutine.
	<-time.After(earlyAnswerWait + 50*time.Millisecond)
	close(rest)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the body's read has no deadline left")
	require.Equal(t, "too much", string(b))
}
