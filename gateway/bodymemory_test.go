package gateway

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Clients that announce the largest body allowed and send a few bytes of it
// get buffers for what they sent, not for what they announced. Measured on
// the gateway's process: 60 such connections allocated about 5 MiB in all
// (64 KiB of body buffer each plus net/http's connection state), against
// 60 x 32 MiB = 1.9 GiB when the announced Content-Length sized the buffer.
func TestGatewayBuffersBodiesAsTheyArriveNotAsAnnounced(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	const (
		conns     = 60
		announced = DefaultMaxBodyBytes
		sent      = `{"model":` // 9 bytes
		cont      = "HTTP/1.1 100 Continue\r\n\r\n"
	)
	addr := strings.TrimPrefix(h.gw.URL, "http://")

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cs := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		cs = append(cs, c)
		_, err = fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", announced)
		require.NoError(t, err)
	}
	// net/http answers 100 Continue when the handler first reads the body,
	// which is after the handler made its first buffer.
	for _, c := range cs {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
		got := make([]byte, len(cont))
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, cont, string(got))
		_, err = io.WriteString(c, sent)
		require.NoError(t, err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d connections announcing %d bytes and sending %d: %.1f MiB allocated (heap in use %+.1f MiB); announced in all %.1f MiB",
		conns, announced, len(sent), float64(alloc)/(1<<20),
		(float64(after.HeapInuse)-float64(before.HeapInuse))/(1<<20), float64(conns*announced)/(1<<20))
	// 64 MiB is two announced bodies: what the 60 connections may cost at
	// most, with room for the test's and net/http's own allocations.
	require.Less(t, alloc, uint64(64<<20), "allocated bytes")
}
