package yamldoc_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/yamldoc"
)

func Example() {
	js, err := yamldoc.ToJSON([]byte("---\nmodel: m\nblockSize: 16\n---\n"))
	fmt.Println(string(js), err)
	_, err = yamldoc.ToJSON([]byte("model: m\n---\nbogus: 1\n"))
	fmt.Println(err)
	// Output:
	// {"blockSize":16,"model":"m"} <nil>
	// holds more than one document (a "---" between two, or JSON values one after another): kvroute reads one; merge them
}
