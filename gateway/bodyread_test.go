package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// onlyReader hides a reader's type, so that net/http sends it chunked.
type onlyReader struct{ io.Reader }

func TestGatewayReadsBodiesUpToTheLimitWithAndWithoutLength(t *testing.T) {
	defer leakcheck.Check(t)()
	const limit = 100 << 10 // past the first buffer of either kind
	h := newHarness(t, 1, Config{MaxBodyBytes: limit})
	defer h.close()
	for _, c := range []struct {
		name    string
		size    int
		chunked bool
		status  int
	}{
		{"length at the limit", limit, false, http.StatusOK},
		{"chunked at the limit", limit, true, http.StatusOK},
		{"chunked past the limit", limit + 1, true, http.StatusRequestEntityTooLarge},
		{"length past the limit", limit + 1, false, http.StatusRequestEntityTooLarge},
		{"small chunked", 100, true, http.StatusOK},
	} {
		body := bodyOfSize(t, c.size)
		var rd io.Reader = strings.NewReader(body)
		if c.chunked {
			rd = onlyReader{rd}
		}
		req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/completions", rd)
		require.NoError(t, err)
		resp, err := h.client.Do(req)
		require.NoError(t, err, c.name)
		got := readAll(t, resp)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.name, got)
		require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond, c.name)
	}
	bodies, _ := h.ups[0].received()
	require.Len(t, bodies, 3)
	require.Len(t, bodies[1], limit, "the chunked body at the limit is forwarded whole")
}

// readBody charges the budget what its buffer holds, grows it by doubling
// up to the body's length and keeps nothing of a body refused for its
// announced length.
func TestReadBodyChargesItsBuffers(t *testing.T) {
	h, err := New(Config{MaxBodyBytes: 1 << 20}, new(RoundRobin), Options{})
	require.NoError(t, err)
	read := func(body string, length int64) ([]byte, int64, error) {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", onlyReader{strings.NewReader(body)})
		r.ContentLength = length
		return h.readBody(httptest.NewRecorder(), r)
	}
	for _, c := range []struct {
		size   int
		length int64
		held   int64
	}{
		{0, 0, 0},
		{10, 10, 10},
		{10, -1, 8 << 10},
		{200 << 10, 200 << 10, 200 << 10}, // 64 KiB, 128 KiB, then the length
		{200 << 10, -1, 256 << 10},
		{1 << 20, -1, 1 << 20},
	} {
		body := strings.Repeat("x", c.size)
		got, held, err := read(body, c.length)
		require.NoError(t, err)
		require.NotNil(t, got)
		require.Equal(t, body, string(got))
		require.Equal(t, c.held, held, "size %d, length %d", c.size, c.length)
		require.Equal(t, int64(cap(got)), held)
		h.budget.Release(held)
	}
	got, held, err := read("x", 2<<20)
	var tooLarge *http.MaxBytesError
	require.True(t, errors.As(err, &tooLarge), "%v", err)
	require.Nil(t, got)
	require.Zero(t, held, "a body announced past the limit is not buffered")
	_, held, err = read(strings.Repeat("x", 1<<20+1), -1)
	require.True(t, errors.As(err, &tooLarge), "%v", err)
	h.budget.Release(held)
	require.Zero(t, h.budget.InUse())
}
