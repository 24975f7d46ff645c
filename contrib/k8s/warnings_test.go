package k8s

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// logRecorder is a slog.Handler that keeps the pod attribute of every
// warning with a given message.
type logRecorder struct {
	msg  string
	mu   sync.Mutex
	vals []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Message != l.msg {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "pod" {
			l.mu.Lock()
			l.vals = append(l.vals, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *logRecorder) values() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{}, l.vals...)
}

// eventuallyLabel waits for the last endpoint set to hold id with label
// key set to value: the recompute that made it has logged.
func (f *fixture) eventuallyLabel(t *testing.T, id, key, value string) {
	t.Helper()
	require.Eventually(t, func() bool {
		f.rec.mu.Lock()
		defer f.rec.mu.Unlock()
		if len(f.rec.sets) == 0 {
			return false
		}
		for _, e := range f.rec.sets[len(f.rec.sets)-1] {
			if e.ID == id {
				return e.Labels[key] == value
			}
		}
		return false
	}, wait, 5*time.Millisecond, "want %s with %s=%s", id, key, value)
}

// A pod's unknown role label is warned of once, when it first shows and
// each time its value changes, not at every recompute; a pod fixed or gone
// is forgotten, so the same value on it again is warned of again.
func TestUnknownRoleIsWarnedOfOncePerValue(t *testing.T) {
	defer leakcheck.Check(t)()
	logs := &logRecorder{msg: "k8s: unknown role label value, serving both roles"}
	labels := func(role, n string) map[string]string {
		return map[string]string{"app": "vllm", disagg.DefaultRoleLabel: role, "n": n}
	}
	f := newFixtureWithOptions(t, Config{Pool: "pool"}, []*corev1.Pod{
		pod("x", "10.0.0.1", labels("teacher", "0"), true),
		pod("a", "10.0.0.2", labels(disagg.RoleDecode, "0"), true),
	}, nil, Options{Set: telemetry.Set{Logger: slog.New(logs)}}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000", "10.0.0.2:8000")
	const x = ns + "/x"

	// Other pods' changes recompute the set: x's unchanged label is not warned of again.
	for _, n := range []string{"1", "2", "3"} {
		f.updatePod(t, pod("a", "10.0.0.2", labels(disagg.RoleDecode, n), true))
		f.eventuallyLabel(t, "10.0.0.2:8000", "n", n)
	}
	require.Equal(t, []string{x}, logs.values())

	f.updatePod(t, pod("x", "10.0.0.1", labels("student", "1"), true))
	f.eventuallyLabel(t, "10.0.0.1:8000", disagg.DefaultRoleLabel, "student")
	f.updatePod(t, pod("a", "10.0.0.2", labels(disagg.RoleDecode, "4"), true))
	f.eventuallyLabel(t, "10.0.0.2:8000", "n", "4")
	require.Equal(t, []string{x, x}, logs.values(), "a new value is warned of, once")

	// Fixed, then wrong again: warned of again.
	f.updatePod(t, pod("x", "10.0.0.1", labels(disagg.RolePrefill, "2"), true))
	f.eventuallyLabel(t, "10.0.0.1:8000", disagg.DefaultRoleLabel, disagg.RolePrefill)
	f.updatePod(t, pod("x", "10.0.0.1", labels("student", "3"), true))
	f.eventuallyLabel(t, "10.0.0.1:8000", "n", "3")
	require.Equal(t, []string{x, x, x}, logs.values())

	// Gone, then back with the same value: warned of again.
	require.NoError(t, f.kube.CoreV1().Pods(ns).Delete(context.Background(), "x", metav1.DeleteOptions{}))
	f.eventually(t, "10.0.0.2:8000")
	_, err := f.kube.CoreV1().Pods(ns).Create(context.Background(), pod("x", "10.0.0.1", labels("student", "3"), true), metav1.CreateOptions{})
	require.NoError(t, err)
	f.eventually(t, "10.0.0.1:8000", "10.0.0.2:8000")
	require.Equal(t, []string{x, x, x, x}, logs.values())
}
