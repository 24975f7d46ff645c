package kvevents_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/replay"
)

// TestPublisherDefaultsBindTheSubscribersDefaultPorts holds the publisher
// side's default bind addresses (zmqpub's PUB socket, replay's ROUTER
// socket: settings of the Go publisher, owned there) to the ports a pool
// dials by default (owned here), so a publisher and a pool left at their
// defaults find each other. The two are separate settings of separate
// components; they must agree, not be declared from one another (replay
// cannot import kvevents, and an address constant cannot be built from an
// integer constant).
func TestPublisherDefaultsBindTheSubscribersDefaultPorts(t *testing.T) {
	require.Equal(t, fmt.Sprintf("tcp://*:%d", kvevents.DefaultEventsPort), zmqpub.DefaultAddr)
	require.Equal(t, fmt.Sprintf("tcp://*:%d", kvevents.DefaultReplayPort), replay.DefaultServerAddr)
}
