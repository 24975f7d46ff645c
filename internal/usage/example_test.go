package usage_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/usage"
)

// Example reads the cached prompt tokens from the final chunk of a vLLM
// stream that asked for stream_options.include_usage, the bytes arriving in
// pieces that split a line.
func Example() {
	u := &usage.Scanner{SSE: true}
	u.Write([]byte("data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":300,"))
	u.Write([]byte("\"prompt_tokens_details\":{\"cached_tokens\":256}}}\n\ndata: [DONE]\n\n"))
	fmt.Println(u.Result())
	// Output: 256 observed
}
