package redistest_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/redistest"
)

// Tests call redistest.Start(t) and connect to Server.Addr; Available says
// whether this machine can run them.
func ExampleAvailable() {
	fmt.Println(redistest.Binary, redistest.EnvRequire)
	// Output: /usr/bin/redis-server KVROUTE_REQUIRE_REDIS
}
