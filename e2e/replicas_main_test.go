package e2e

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the --replicas demo's child
// gateway: RunReplicas re-executes its own binary.
func TestMain(m *testing.M) {
	if RunReplicaGatewayChild() {
		return
	}
	os.Exit(m.Run())
}
