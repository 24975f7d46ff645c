package sidecar

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAllowNetworks(t *testing.T) {
	allow := AllowNetworks([]netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("fd00::/64"),
		netip.MustParsePrefix("::ffff:192.168.1.0/120"), // 192.168.1.0/24, written mapped
	}, nil)
	for _, ok := range []string{"10.1.2.3:8000", "[fd00::1]:8000", "192.168.1.7:8000", "[::ffff:10.0.0.1]:8000"} {
		require.True(t, allow(ok), ok)
	}
	for _, bad := range []string{"11.0.0.1:8000", "[fd01::1]:8000", "192.168.2.7:8000", "localhost:8000",
		"prefill.example.com:8000", "[fe80::1%eth0]:8000", "10.0.0.1", "", "169.254.169.254:80"} {
		require.False(t, allow(bad), bad)
	}

	ports := AllowNetworks([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, []int{8000, 8200})
	require.True(t, ports("10.0.0.1:8000"))
	require.True(t, ports("10.0.0.1:8200"))
	require.False(t, ports("10.0.0.1:22"))
	require.False(t, ports("10.0.0.1:x"))

	none := AllowNetworks(nil, nil)
	require.False(t, none("10.0.0.1:8000"), "no prefixes admit nothing")
}
