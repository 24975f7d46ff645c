package tokenin_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/tokenin"
)

// Example reads a GenerateRequest's prompt: its token IDs (1.0 and "3" read
// as vLLM reads them) and cache salt.
func Example() {
	p, salt, err := tokenin.Prompt([]byte(`{"model":"m","token_ids":[1,2.0,"3"],"cache_salt":"tenant-a"}`))
	fmt.Println(p.TokenIDs, salt, err)
	_, _, err = tokenin.Prompt([]byte(`{"model":"m","prompt":"text"}`))
	fmt.Println(err)
	// Output:
	// [1 2 3] tenant-a <nil>
	// token_ids must be a non-empty list of token IDs
}
