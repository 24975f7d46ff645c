package models_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/models"
)

// A canary: 90 % of "llama" goes to llama-v1, 10 % to llama-v2, with a
// seeded random source so that the split is reproducible; the endpoints
// say which models they serve.
func Example() {
	rnd := rand.New(rand.NewPCG(1, 2))
	reg, err := models.New(models.Config{
		Served: map[string][]string{"10.0.0.1:8000": {"llama-v1"}, "10.0.0.2:8000": {"llama-v2"}},
		Rewrites: []models.Rule{{Model: "llama", Targets: []models.Target{
			{Model: "llama-v1", Weight: 90}, {Model: "llama-v2", Weight: 10}}}},
	}, models.Options{Random: rnd.Float64})
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	eps := reg.Annotate([]kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}, {ID: "10.0.0.3:8000"}})
	for _, e := range eps {
		fmt.Println(e.ID, e.Models)
	}
	fmt.Println(models.Served(eps, "base"))
	n := map[string]int{}
	for range 1000 {
		m, _ := reg.Resolve("llama")
		n[m]++
	}
	fmt.Println(n["llama-v1"] > 850, n["llama-v2"] > 50)
	m, rewritten := reg.Resolve("other")
	fmt.Println(m, rewritten)
	// Output:
	// 10.0.0.1:8000 [llama-v1]
	// 10.0.0.2:8000 [llama-v2]
	// 10.0.0.3:8000 []
	// [base llama-v1 llama-v2]
	// true true
	// other false
}
