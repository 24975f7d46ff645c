package simengine

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// With MaxNumSeqs 2, five requests submitted together run two at a time: the
// other three wait in FCFS order, and each leaves the waiting queue only when a
// running request finishes, as in vLLM's scheduler.
func TestMaxNumSeqsRunsAtMostNAndQueuesFCFS(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{Model: "m", BlockSize: 4, MaxNumSeqs: 2}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer e.Close()
	res := make([]Result, 5)
	for i := range res {
		// Different lengths, so that finishing order alone could not explain
		// the start order.
		_, err := e.Submit(Request{Prompt: seqTokens(i*100+1, 9), MaxTokens: 3 + (4-i)*2,
			OnDone: func(r Result) { res[i] = r }})
		require.NoError(t, err)
	}
	next, ok := e.NextEventTime()
	require.True(t, ok)
	e.AdvanceTo(next) // the first step is scheduled
	st := e.Stats()
	require.Equal(t, 2, st.Running)
	require.Equal(t, 3, st.Waiting)
	require.Equal(t, 2.0, gaugeValue(t, reg, "vllm:num_requests_running"))
	require.Equal(t, 3.0, gaugeValue(t, reg, "vllm:num_requests_waiting"))

	// Throughout the run, never more than two are running.
	for {
		next, ok := e.NextEventTime()
		if !ok {
			break
		}
		e.AdvanceTo(next)
		require.LessOrEqual(t, e.Stats().Running, 2)
	}
	for i := range res {
		require.NoError(t, res[i].Err)
	}
	// Requests 0 and 1 start at once; 2, 3 and 4 each start when a running one
	// finishes, in submission order.
	require.Equal(t, res[0].FirstToken, res[1].FirstToken)
	for i := 2; i < len(res); i++ {
		require.True(t, res[i].FirstToken.After(res[i-1].FirstToken) || res[i].FirstToken.Equal(res[i-1].FirstToken),
			"request %d started before request %d", i, i-1)
	}
	finishes := []time.Time{res[0].Finish, res[1].Finish}
	for i := 2; i < len(res); i++ {
		// A waiting request starts only after some earlier request finished.
		earliest := finishes[0]
		for _, f := range finishes {
			if f.Before(earliest) {
				earliest = f
			}
		}
		require.False(t, res[i].FirstToken.Before(earliest), "request %d ran before a slot was free", i)
		finishes = append(finishes, res[i].Finish)
	}
}

// A waiting request that is aborted leaves the waiting queue at once and never
// runs; the requests behind it keep their order.
func TestAbortedWaitingRequestLeavesTheQueue(t *testing.T) {
	e, err := New(Config{BlockSize: 4, MaxNumSeqs: 1}, Options{})
	require.NoError(t, err)
	defer e.Close()
	var order []ReqID
	res := map[ReqID]Result{}
	ids := make([]ReqID, 3)
	for i := range ids {
		ids[i], err = e.Submit(Request{Prompt: seqTokens(i*100+1, 9), MaxTokens: 4,
			OnToken: func(ev TokenEvent) {
				if ev.Index == 0 {
					order = append(order, ev.ID)
				}
			},
			OnDone: func(r Result) { res[r.ID] = r }})
		require.NoError(t, err)
	}
	next, _ := e.NextEventTime()
	e.AdvanceTo(next)
	require.Equal(t, 2, e.Stats().Waiting)
	require.True(t, e.Abort(ids[1]))
	require.Equal(t, 1, e.Stats().Waiting)
	require.Equal(t, 1, e.Stats().Running)
	e.RunUntilIdle()
	require.ErrorIs(t, res[ids[1]].Err, ErrAborted)
	require.Empty(t, res[ids[1]].OutputTokens)
	require.True(t, res[ids[1]].FirstToken.IsZero(), "the aborted request never ran")
	require.Equal(t, []ReqID{ids[0], ids[2]}, order)
	require.Equal(t, uint64(1), e.Stats().RequestAborted)
}

// gaugeValue reads the one series of a gauge from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}
