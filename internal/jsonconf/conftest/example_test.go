package conftest_test

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
)

// pollConfig is a configuration type with kvroute's JSON methods.
type pollConfig struct {
	Interval time.Duration `json:"interval"`
	Max      int           `json:"max"`
}

func (c *pollConfig) UnmarshalJSON(data []byte) error {
	type plain pollConfig
	return jsonconf.Unmarshal(data, (*plain)(c))
}

func (c pollConfig) MarshalJSON() ([]byte, error) {
	type plain pollConfig
	return jsonconf.Marshal(plain(c))
}

// A configuration type's table: the rule each case holds it to, then a
// round trip through encoding/json.
func Example() {
	err := conftest.Check(pollConfig{Interval: time.Second, Max: 8}, []conftest.Case[pollConfig]{
		{Name: "case variant", Doc: `{"Interval":"2s"}`, Err: "Interval: unknown key"},
		{Name: "repeated key", Doc: `{"max":1,"max":2}`, Err: "max: key given twice"},
		{Name: "bare number", Doc: `{"interval":250}`, Err: "interval: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"interval":"250ms"}`, Want: func(c *pollConfig) { c.Interval = 250 * time.Millisecond }},
		{Name: "absent keys keep their value", Doc: `{}`},
	}, pollConfig{Interval: 90 * time.Second, Max: 3}, `"interval":"1m30s"`)
	fmt.Println(err)

	err = conftest.Check(pollConfig{}, []conftest.Case[pollConfig]{
		{Name: "unknown key", Doc: `{"maxx":1}`},
	}, pollConfig{})
	fmt.Println(err)
	// Output:
	// <nil>
	// case "unknown key": {"maxx":1}: maxx: unknown key
}
