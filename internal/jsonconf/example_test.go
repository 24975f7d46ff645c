package jsonconf_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

func Example() {
	type Speculative struct {
		TTL time.Duration `json:"ttl"`
	}
	type Config struct {
		Speculative Speculative `json:"speculative"`
	}
	cfg := Config{Speculative: Speculative{TTL: 2 * time.Second}}
	fmt.Println(jsonconf.Decode(strings.NewReader(`{"speculative":{"ttl":2000}}`), &cfg))
	fmt.Println(jsonconf.Decode(strings.NewReader(`{"speculative":{"ttl":"250ms"}}`), &cfg), cfg.Speculative.TTL)
	out, _ := jsonconf.Marshal(cfg)
	fmt.Println(string(out))
	// Output:
	// speculative.ttl: bare number 2000 is not a duration: write a Go duration string with its unit, such as "2s" or "250ms"
	// <nil> 250ms
	// {"speculative":{"ttl":"250ms"}}
}
