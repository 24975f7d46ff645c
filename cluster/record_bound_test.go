package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
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
			seq, loads, _ := r.localLoad()
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

// nullStore accepts every write and holds nothing.
type nullStore struct{}

func (nullStore) Refresh(context.Context, string, []byte, time.Duration, string, string) error {
	return nil
}
func (nullStore) Members(context.Context, string) ([]string, error)   { return nil, nil }
func (nullStore) Get(context.Context, []string) ([]Value, error)      { return nil, nil }
func (nullStore) Forget(context.Context, string, []string) error      { return nil }
func (nullStore) Leave(context.Context, string, string, string) error { return nil }
func (nullStore) Publish(context.Context, string, []byte) error       { return nil }

// The loaded endpoints a record leaves out, beyond MaxEndpoints or beyond
// the bytes of a record every peer accepts, are counted at every refresh
// in kvroute_cluster_record_loads_dropped_total by reason: they used to be
// left out without a trace, so the peers underestimated the replica's
// load with nothing to say so.
func TestRecordLoadsLeftOutAreCounted(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
			require.NoError(t, err)
			t.Cleanup(ix.Close)
			tr, err := tokenload.NewTracker(tokenload.Options{})
			require.NoError(t, err)
			reg := prometheus.NewRegistry()
			cfg := Config{Pool: "bound", ReplicaID: "a", MaxEndpoints: 3, DisableSharedDecisions: !shared}
			m, err := NewManual(cfg, ix, tr, nullStore{}, Options{Set: telemetry.Set{Registerer: reg}})
			require.NoError(t, err)
			t.Cleanup(m.Replica().Close)
			for i := range 5 {
				tr.Dispatch(fmt.Sprintf("10.0.0.%d:8000", i+1), 100)
			}
			m.Refresh()
			m.Refresh()
			require.Equal(t, 4.0, testutil.ToFloat64(m.r.met.recordLoadsDropped[recordDropMax]), "2 endpoints left out of each of 2 records")
			require.Zero(t, testutil.ToFloat64(m.r.met.recordLoadsDropped[recordDropBytes]))
		})
	}
	r := &Replica{cfg: Config{MaxEndpoints: DefaultMaxEndpoints}, dq: deltaQueue{totals: map[string]localTotal{}}}
	for i := range DefaultMaxEndpoints {
		r.dq.totals[fmt.Sprintf("%0*d", maxNameBytes, i)] = localTotal{tokens: 1, requests: 1}
	}
	_, loads, left := r.localLoad()
	require.Zero(t, left[recordDropMax])
	require.Equal(t, DefaultMaxEndpoints-len(loads), left[recordDropBytes], "long names: what does not fit 1 MiB is counted")
	require.Positive(t, left[recordDropBytes])
}
