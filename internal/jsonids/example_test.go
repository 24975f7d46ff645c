package jsonids_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonids"
)

// A rendered prompt's token IDs written into a completions body.
func Example() {
	ids := []uint32{151644, 872, 198, 9707}
	body := append([]byte(`{"model":"m","prompt":`), jsonids.Append(nil, ids)...)
	body = append(body, '}')
	fmt.Println(string(body), jsonids.Len(ids))
	// Output: {"model":"m","prompt":[151644,872,198,9707]} 21
}
