package mmfeatures_test

import (
	"encoding/json"
	"fmt"

	"github.com/kvroute/kvroute/internal/mmfeatures"
)

// Items pairs each modality's placeholders with its hashes, index by index,
// and sorts the items by offset; features vLLM refuses are an error.
func ExampleFeatures_Items() {
	for _, body := range []string{
		`{"mm_hashes":{"image":["b","a"],"audio":["c"]},
		  "mm_placeholders":{"image":[{"offset":6,"length":2},{"offset":0,"length":2}],"audio":[{"offset":2,"length":4}]}}`,
		`{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}],"audio":[{"offset":2,"length":1}]}}`,
		`{"mm_hashes":{"image":["a"],"audio":["b"]},"mm_placeholders":{"image":[{"offset":0,"length":4}],"audio":[{"offset":1,"length":1}]}}`,
	} {
		var f mmfeatures.Features
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			panic(err)
		}
		items, err := f.Items(8)
		fmt.Println(items, err)
	}
	// Output:
	// [{image a 0 2} {audio c 2 4} {image b 6 2}] <nil>
	// [] features: modality "audio" has placeholders but no hashes (mm_hashes and mm_placeholders must name the same modalities)
	// [] features: placeholders overlap: image at [0, +4) and audio at [1, +1)
}
