package models

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/telemetry"
)

// A name is reported as an unrewritten alias when the answer lists it as a
// base model after the first base model, with that model's root, and no
// rule rewrites it to exactly that model.
func TestUnrewrittenAliases(t *testing.T) {
	tbl, err := NewTable([]Rule{
		{Model: "b", Targets: []Target{{Model: "a"}}},
		{Model: "c", Targets: []Target{{Model: "a", Weight: 1}, {Model: "z", Weight: 1}}},
	}, Options{})
	require.NoError(t, err)
	base := func(id, root string) Card { return Card{ID: id, Root: root} }
	for _, c := range []struct {
		name      string
		cards     []Card
		t         *Table
		wantFirst string
		want      []string
	}{
		{"no table", []Card{base("a", "/m"), base("b", "/m"), base("d", "/m")}, nil, "a", []string{"b", "d"}},
		{"b rewritten to a, c to a or z", []Card{base("a", "/m"), base("b", "/m"), base("c", "/m")}, tbl, "a", []string{"c"}},
		{"other roots are other models", []Card{base("a", "/m"), base("x", "/n")}, nil, "a", nil},
		{"adapters are no aliases", []Card{base("a", "/m"), {ID: "sql", Root: "/m", Parent: "a"}}, nil, "a", nil},
		{"the first base model after an adapter", []Card{{ID: "sql", Root: "/l", Parent: "a"}, base("a", "/m"), base("d", "/m")}, nil, "a", []string{"d"}},
		{"no root known", []Card{base("a", ""), base("b", "")}, nil, "", nil},
		{"no base model", []Card{{ID: "sql", Root: "/l", Parent: "a"}}, nil, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, got := unrewrittenAliases(c.cards, c.t)
			require.Equal(t, c.want, got)
			if c.want != nil {
				require.Equal(t, c.wantFirst, first)
			}
		})
	}
}

// The poller counts an endpoint's unrewritten aliases in
// kvroute_models_unrewritten_aliases and logs each once, however often the
// engine lists it; an alias the engine stops listing leaves the gauge, and
// one listed again is logged again.
func TestPollerReportsUnrewrittenAliasesOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	var logs syncbuf.Buffer
	tbl, err := NewTable([]Rule{{Model: "b", Targets: []Target{{Model: "a"}}}}, Options{})
	require.NoError(t, err)
	p, err := newPoller(PollConfig{Enabled: true, Interval: time.Hour},
		Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Clock: telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}, tbl)
	require.NoError(t, err)
	defer p.Close()
	e := newEngine(t)
	defer e.srv.Close()
	id := e.endpoint().ID
	p.mu.Lock()
	p.urls[id] = e.srv.URL // no kick: the test polls
	p.mu.Unlock()
	gauge := func() float64 { return testutil.ToFloat64(p.met.aliases.WithLabelValues(id)) }
	warned := func(name string) int { return strings.Count(logs.String(), "name="+name+" ") }

	e.answer(http.StatusOK, `{"object":"list","data":[{"id":"a","root":"/m/a"},{"id":"b","root":"/m/a"},{"id":"d","root":"/m/a"},{"id":"x","root":"/m/x"}]}`)
	p.PollOnce(context.Background())
	p.PollOnce(context.Background())
	require.Equal(t, 1.0, gauge(), "d: b is rewritten to a, x has a root of its own")
	require.Equal(t, 1, warned("d"), "logged once over two polls")
	require.Zero(t, warned("b"))
	require.Contains(t, logs.String(), "first=a")

	e.answer(http.StatusOK, `{"object":"list","data":[{"id":"a","root":"/m/a"}]}`)
	p.PollOnce(context.Background())
	require.Zero(t, gauge())
	e.answer(http.StatusOK, `{"object":"list","data":[{"id":"a","root":"/m/a"},{"id":"d","root":"/m/a"}]}`)
	p.PollOnce(context.Background())
	require.Equal(t, 1.0, gauge())
	require.Equal(t, 2, warned("d"), "listed again after it was gone: logged again")

	p.SetEndpoints(nil)
	require.Zero(t, testutil.CollectAndCount(p.met.aliases), "a removed endpoint's series is forgotten")
}
