package models

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
)

// Serves applies the Router's rule to a request without a model: it asks
// for the base model, which an endpoint without Models serves and an
// endpoint listing models serves only when it lists the base.
func TestServesTakesAnEmptyModelAsTheBase(t *testing.T) {
	bare := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}}
	require.True(t, Serves(bare, "", "llama"), "an endpoint without Models serves the base model, named or not")
	require.True(t, Serves(bare, "llama", "llama"))
	listing := []kvroute.Endpoint{{ID: "10.0.0.2:8000", Models: []string{"qwen"}}}
	require.False(t, Serves(listing, "", "llama"), "the base model is not among its models")
	require.True(t, Serves(listing, "", "qwen"))
	require.False(t, Serves(nil, "", "llama"))
}

// A Served entry must name at least one model: an empty list (or null)
// for an endpoint is a configuration error, not a silent "base model
// only" that also hides the endpoint's label and /v1/models answer, since
// Served wins over both for the endpoints it names.
func TestServedEntryWithoutModelsIsInvalid(t *testing.T) {
	for _, ms := range [][]string{{}, nil} {
		cfg := Config{Served: map[string][]string{"10.0.0.1:8000": ms}}
		require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig, "%#v", ms)
		_, err := New(cfg, Options{})
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
	var c Config
	require.NoError(t, c.UnmarshalJSON([]byte(`{"served":{"10.0.0.1:8000":[]}}`)))
	require.ErrorContains(t, c.Validate(), "served[10.0.0.1:8000]")
}

// List is Served plus the rewrite names with a served target, sorted; a
// name whose targets nobody serves is not offered.
func TestListOffersOnlyRewritesWithAServedTarget(t *testing.T) {
	tb, err := NewTable([]Rule{
		{Model: "alias", Targets: []Target{{Model: "llama"}}},
		{Model: "ghost", Targets: []Target{{Model: "gone"}}},
		{Model: "base-alias", Targets: []Target{{Model: "base"}}},
	}, Options{})
	require.NoError(t, err)
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000", Models: []string{"llama"}}, {ID: "10.0.0.2:8000"}}
	require.Equal(t, []string{"alias", "base", "base-alias", "llama"}, List(eps, "base", tb))
	require.Equal(t, []string{"base", "llama"}, List(eps, "base", nil))
	require.Empty(t, List(nil, "base", tb))
}

// A Registry keeps its own copy of the configuration's maps: a caller that
// changes its Served or Adapters after New (the gateway hands its
// configuration on, and the status page reads it) changes nothing the
// Registry routes by, and races with no request. It used to read the
// caller's maps on every request.
func TestRegistryKeepsItsOwnCopyOfTheConfiguration(t *testing.T) {
	cfg := Config{Served: map[string][]string{"10.0.0.1:8000": {"llama", "sql"}}, Adapters: map[string]string{"sql": "llama"}}
	r, err := New(cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	cfg.Served["10.0.0.1:8000"][1] = "chat"
	cfg.Served["10.0.0.2:8000"] = []string{"qwen"}
	cfg.Adapters["sql"] = "qwen"
	cfg.Adapters["llama"] = "x"
	eps := r.Annotate([]kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}})
	require.Equal(t, []string{"llama", "sql"}, eps[0].Models)
	require.Empty(t, eps[1].Models)
	base, ok := r.Adapter(eps, "sql")
	require.True(t, ok)
	require.Equal(t, "llama", base)
	_, ok = r.Adapter(eps, "llama")
	require.False(t, ok)
}

// A rewritten name is listed with the parent of the adapter it is routed
// as, as vLLM lists that adapter: an alias of an adapter has the adapter's
// base, as has a canary between two adapters of one base; a canary between
// an adapter and a base model, or adapters of two bases, has none, as an
// alias of a base model has none. A target nobody serves does not count.
// An alias of an adapter used to be listed with a null parent though it was
// routed as the adapter.
func TestRewrittenNamesHaveTheirTargetsParent(t *testing.T) {
	r, err := New(Config{
		Adapters: map[string]string{"sql": "llama", "sql-v2": "llama", "chat": "qwen"},
		Rewrites: []Rule{
			{Model: "db", Targets: []Target{{Model: "sql"}}},
			{Model: "db-canary", Targets: []Target{{Model: "sql", Weight: 9}, {Model: "sql-v2", Weight: 1}}},
			{Model: "db-or-gone", Targets: []Target{{Model: "sql"}, {Model: "gone"}}},
			{Model: "mixed", Targets: []Target{{Model: "sql"}, {Model: "llama"}}},
			{Model: "two-bases", Targets: []Target{{Model: "sql"}, {Model: "chat"}}},
			{Model: "big", Targets: []Target{{Model: "llama"}}},
		},
	}, Options{})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000", Models: []string{"llama", "sql", "sql-v2"}}, {ID: "10.0.0.2:8000", Models: []string{"qwen", "chat"}}}
	parents := map[string]string{}
	for _, c := range r.Cards(eps, "llama") {
		parents[c.ID] = c.Parent
	}
	require.Equal(t, map[string]string{
		"db": "llama", "db-canary": "llama", "db-or-gone": "llama",
		"mixed": "", "two-bases": "", "big": "",
		"sql": "llama", "sql-v2": "llama", "chat": "qwen", "llama": "", "qwen": "",
	}, parents)
}
