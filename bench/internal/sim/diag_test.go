package sim

import "math/rand/v2"

// newDiagnostics returns diagnostics whose replicas all draw ties from one
// source seeded with seed, sharing at once when ideal.
func newDiagnostics(seed uint64, ideal bool) *diagnostics {
	rng := rand.New(rand.NewPCG(seed, 0xd1a9))
	return &diagnostics{random: rng.Float64, ideal: ideal}
}
