package extproc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A long prompt's body goes back to Envoy in streamed mutations of at most
// maxBodyChunk bytes, in order, only the last ending the stream: a gateway
// that refuses a streamed chunk above 64 KiB would fail the request whole.
func TestProcessLongBodyReturnsInChunks(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	for _, size := range []int{maxBodyChunk - 200, maxBodyChunk*2 + 1000} {
		body := completionsBody(strings.Repeat("w ", size/2), false)
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
		for off := 0; off < len(body); off += 16 << 10 { // Envoy's chunks
			end := min(off+16<<10, len(body))
			require.NoError(t, st.Send(bodyChunk(body[off:end], end == len(body))))
		}
		hr, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, h.engines[0].id, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader))
		var got strings.Builder
		chunks := 0
		for {
			br, err := st.Recv()
			require.NoError(t, err)
			sr := br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
			require.NotNil(t, sr, "answer %d is a streamed body mutation (got %T)", chunks, br.Response)
			require.LessOrEqual(t, len(sr.GetBody()), maxBodyChunk)
			chunks++
			got.Write(sr.GetBody())
			if sr.GetEndOfStream() {
				break
			}
			require.Less(t, got.Len(), len(body), "the end of stream comes with the body's last byte")
		}
		require.Equal(t, body, got.String(), "the body goes back unchanged")
		require.Equal(t, (len(body)+maxBodyChunk-1)/maxBodyChunk, chunks)
		require.NoError(t, st.CloseSend())
	}
	h.idle()
}
