package cluster_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

// TestMain silences go-redis's process-wide logger: the outage tests make it
// print every failed dial, and the replicas' own logs are what the tests check.
func TestMain(m *testing.M) {
	redis.SetLogger(&logging.VoidLogger{})
	os.Exit(m.Run())
}
