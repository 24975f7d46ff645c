package upstreamfail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
)

func TestClassifyWrappedErrors(t *testing.T) {
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	read := func(err error) error { return &net.OpError{Op: "read", Net: "tcp", Err: err} }
	for _, c := range []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, Other},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), Unreachable},
		{"host unreachable", fmt.Errorf("wrapped: %w", syscall.EHOSTUNREACH), Unreachable},
		{"network unreachable", dial(syscall.ENETUNREACH), Unreachable},
		{"no such host", dial(&net.DNSError{Err: "no such host", Name: "engine-0", IsNotFound: true}), Unreachable},
		{"dns timeout", &net.DNSError{Err: "timeout", Name: "engine-0", IsTimeout: true}, Timeout},
		{"other dial error", dial(errors.New("socket: too many open files")), Unreachable},
		{"deadline", fmt.Errorf("request: %w", context.DeadlineExceeded), Timeout},
		{"socket deadline", read(os.ErrDeadlineExceeded), Timeout},
		{"reset", read(os.NewSyscallError("read", syscall.ECONNRESET)), Closed},
		{"broken pipe", fmt.Errorf("writing the request: %w", syscall.EPIPE), Closed},
		{"eof", io.EOF, Closed},
		{"unexpected eof", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), Closed},
		{"closed", read(net.ErrClosed), Closed},
		{"malformed", errors.New(`malformed HTTP status code "x"`), Other},
		// net/http's Transport returns its unexported errServerClosedIdle
		// for a POST written on a kept-alive connection the server closed
		// meanwhile (its idle timeout, as uvicorn's 5 s keep-alive in
		// front of vLLM): bare from RoundTrip, in a *url.Error from a
		// Client.
		{"server closed idle", errors.New("http: server closed idle connection"), Closed},
		{"server closed idle, client", &url.Error{Op: "Post", URL: "http://10.0.0.1:8000/v1/completions",
			Err: errors.New("http: server closed idle connection")}, Closed},
	} {
		require.Equal(t, c.want, Classify(c.err), c.name)
	}
}

// The kinds of real failures on loopback: a closed port, a server that
// closes the connection without an answer, and a deadline that has passed.
func TestClassifyLoopbackFailures(t *testing.T) {
	defer leakcheck.Check(t)()
	closedAddr := testport.Addr(t) // nothing listens, nor takes the port meanwhile
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	get := func(ctx context.Context, addr string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	err := get(context.Background(), closedAddr)
	require.Error(t, err)
	require.Equal(t, Unreachable, Classify(err), err.Error())

	// A server that reads the request, then closes the connection.
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := srv.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 4096))
		_ = c.Close()
	}()
	err = get(context.Background(), srv.Addr().String())
	<-done
	require.Error(t, err)
	require.Equal(t, Closed, Classify(err), err.Error())

	// A deadline already past: the transport gives up before an answer.
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	err = get(ctx, srv.Addr().String())
	require.Error(t, err)
	require.Equal(t, Timeout, Classify(err), err.Error())
}

func TestKindNamesAreFixed(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range []Kind{Other, Unreachable, Timeout, Closed} {
		require.False(t, seen[k.String()], k.String())
		seen[k.String()] = true
		require.NotEmpty(t, k.Text())
	}
	require.Equal(t, "other", Kind(200).String())
}
