package accuracy_test

import (
	"fmt"

	"github.com/kvroute/kvroute/accuracy"
)

// One request's prediction against the engine's answer: the index predicted
// 5 cached blocks of 64 tokens, the engine (which always computes the last
// prompt token) could reuse at most 4 and reported 4.
func Example() {
	loop, err := accuracy.New(accuracy.Config{}, 64, accuracy.Options{})
	if err != nil {
		panic(err)
	}
	loop.Begin() // the request was routed with a prediction
	o, ok := loop.End(accuracy.Prediction{Endpoint: "10.0.0.1:8000", PromptTokens: 320, CachedTokens: 320}, 256, true)
	fmt.Println(ok, o.Predicted, o.Actual, o.Error, loop.Pending())
	fmt.Println("inaccurate:", loop.Inaccurate("10.0.0.1:8000"))
	// Output:
	// true 256 256 0 0
	// inaccurate: false
}
