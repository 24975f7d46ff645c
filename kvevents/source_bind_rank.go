package kvevents

import (
	"fmt"
	"net"
	"strconv"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// offsetID is the endpoint of rank r of the engine whose topic names id:
// host:(port + r). ok is false when id is not host:port.
func offsetID(id string, r int) (string, bool) {
	host, port, err := net.SplitHostPort(id)
	if err != nil {
		return "", false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n+r > 65535 {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(n+r)), true
}

// rankAddress is the bind address of rank r: the port of addr plus r.
func rankAddress(addr string, r int) (string, error) {
	ep, err := zmqx.Endpoint(addr)
	if err != nil {
		return "", err
	}
	if r == 0 {
		return ep, nil
	}
	i := len(ep) - 1
	for i >= 0 && ep[i] != ':' {
		i--
	}
	port, err := strconv.Atoi(ep[i+1:])
	if err != nil || port <= 0 || port+r > 65535 {
		return "", fmt.Errorf("bindAddress %q: bindRanks %d needs an explicit port with room for every rank", addr, r+1)
	}
	return ep[:i+1] + strconv.Itoa(port+r), nil
}

// validateBind checks the bind-mode settings of c.
func validateBind(c PoolConfig) error {
	if c.BindAddress == "" {
		return nil
	}
	if _, err := zmqx.Endpoint(c.BindAddress); err != nil {
		return fmt.Errorf("kvevents: pool config: bindAddress: %w", err)
	}
	if c.BindRanks > 1 {
		if _, err := rankAddress(c.BindAddress, c.BindRanks-1); err != nil {
			return fmt.Errorf("kvevents: pool config: %w", err)
		}
	}
	return nil
}
