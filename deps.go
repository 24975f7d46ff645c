package kvroute

import (
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/go-zeromq/zmq4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/puzpuzpuz/xsync/v3"
	_ "github.com/shamaton/msgpack/v2"
	_ "github.com/stretchr/testify/require"
	_ "golang.org/x/sync/semaphore"
)
