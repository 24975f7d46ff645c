package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// failingListener is a listener that accepts nothing and whose Accept
// fails for good once fail is closed, as a listener whose socket broke does.
type failingListener struct {
	net.Listener
	fail chan struct{}
}

var errListenerBroke = errors.New("the metrics listener broke")

func (l *failingListener) Accept() (net.Conn, error) {
	<-l.fail
	return nil, errListenerBroke
}

// When one of the picker's servers fails on its own, run stops the others,
// waits for them and returns that server's error, rather than waiting
// forever for a result the failed server already gave.
func TestRunReturnsWhenAServerFails(t *testing.T) {
	defer leakcheck.Check(t)()
	fail := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(fail) })
	calls := 0
	listen = func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if calls++; calls == 3 && err == nil { // the metrics listener
			return &failingListener{Listener: ln, fail: fail}, nil
		}
		return ln, err
	}
	t.Cleanup(func() { listen = net.Listen })

	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, done := startEPP(t, ctx, "--endpoints", "127.0.0.1:1", "--config", cfgPath)

	once.Do(func() { close(fail) })
	select {
	case err := <-done:
		require.ErrorIs(t, err, errListenerBroke)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its metrics server failed")
	}
}
