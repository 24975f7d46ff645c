package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A replica's record stays within what every peer accepts (maxRecordBytes)
// whatever its endpoints' names: MaxEndpoints loaded endpoints with the
// longest names used to make a record over 1 MiB, which the peers then
// refused whole, so they saw none of that replica's load. The loads that
// do not fit are left out of that record; the rest are exact.
func TestRecordStaysWithinWhatPeersAccept(t *testing.T) {
	for _, nameBytes := range []int{20, 259, maxNameBytes} {
		t.Run(fmt.Sprint(nameBytes), func(t *testing.T) {
			r := &Replica{cfg: Config{MaxEndpoints: DefaultMaxEndpoints}, dq: deltaQueue{totals: map[string]localTotal{}}}
			for i := range DefaultMaxEndpoints {
				id := fmt.Sprintf("%0*d", nameBytes, i)
				r.dq.totals[id] = localTotal{tokens: 1 << 40, requests: 1 << 40}
			}
			seq, loads := r.localLoad()
			url := "http://" + strings.Repeat("h", maxNameBytes-len("http://"))
			data := encodeRecord(nil, url, 1<<62, seq, loads, []QueueDepth{{Priority: -1, Requests: 1000}, {Priority: 1, Requests: 1000}})
			require.LessOrEqual(t, len(data), maxRecordBytes)
			rec, err := decodeRecord(data, DefaultMaxEndpoints)
			require.NoError(t, err)
			require.Len(t, rec.Loads, len(loads))
			for _, l := range rec.Loads {
				require.Equal(t, r.dq.totals[l.Endpoint], localTotal{l.Tokens, l.Requests})
			}
			if nameBytes == 20 {
				require.Len(t, loads, DefaultMaxEndpoints, "short names: every loaded endpoint fits")
			}
		})
	}
}
