package modelcard_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/internal/modelcard"
)

// A card's permission list, as vLLM writes it (the ID is fresh each time).
func ExampleList() {
	l := modelcard.List(1700000000)
	b, _ := json.Marshal(l)
	fmt.Println(len(l), strings.HasPrefix(l[0].ID, "modelperm-"), len(l[0].ID))
	fmt.Println(strings.Replace(string(b), l[0].ID, "modelperm-…", 1))
	// Output:
	// 1 true 42
	// [{"id":"modelperm-…","object":"model_permission","created":1700000000,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]
}
