package sim

// Quick returns a small shared-prefix configuration that runs in about a
// tenth of a second per policy: 4 engines of 1,024 blocks, 64 groups × 5
// users with the default lengths (a working set of about 97 % of the
// fleet's cache), 400 requests, and otherwise DefaultConfig (two gateway
// replicas). Tests and examples use it.
func Quick(load float64) Config {
	cfg := DefaultConfig(SharedPrefix, load)
	cfg.Fleet.Engines = 4
	cfg.Workload.Groups = 64
	cfg.Workload.Requests = 400
	return cfg
}
