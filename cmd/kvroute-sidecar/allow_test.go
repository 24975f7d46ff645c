package main

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestParseAllowedPrefillers(t *testing.T) {
	o, err := parseFlags([]string{"--allowed-prefiller-networks", "10.0.0.0/8, 192.168.1.7", "--allowed-prefiller-networks", "fd00::/64",
		"--allowed-prefiller-ports", "8000,8200"})
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd00::/64")}, o.allowNets)
	require.Equal(t, []int{8000, 8200}, o.allowPorts)

	for _, bad := range [][]string{
		{"--allowed-prefiller-networks", "pods.example.com"},
		{"--allowed-prefiller-networks", ","},
		{"--allowed-prefiller-networks", "fe80::1%eth0"},
		{"--allowed-prefiller-networks", "10.0.0.0/8", "--allowed-prefiller-ports", "0"},
		{"--allowed-prefiller-networks", "10.0.0.0/8", "--allowed-prefiller-ports", "x"},
		{"--allowed-prefiller-ports", "8000"},
	} {
		_, err := parseFlags(bad)
		require.Error(t, err, "%q", bad)
	}
}

// With --allowed-prefiller-networks, a prefiller the header names outside
// them is never contacted: the decoder prefills locally and the fallback is
// counted as not_allowed; one inside them gets the prefill step.
func TestServeAllowedPrefillers(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dec, pre := startPDEngines(t)
	for _, tc := range []struct{ nets, want string }{
		{"10.0.0.0/8", `kvroute_sidecar_prefill_fallbacks_total{reason="not_allowed"} 1`},
		{"127.0.0.0/8", `kvroute_sidecar_requests_total{outcome="split"} 1`},
	} {
		o, err := parseFlags([]string{"--host", "127.0.0.1", "--port", "0", "--metrics-port", "0", "--decoder", "http://" + dec.Addr(),
			"--allowed-prefiller-networks", tc.nets})
		require.NoError(t, err)
		a, stop := startServe(t, o)
		before := pre.Engine().Stats().RequestSuccess
		postSplit(t, a[0], pre.Addr())
		require.Contains(t, getBody(t, "http://"+a[1]+"/metrics"), tc.want, tc.nets)
		if tc.nets == "10.0.0.0/8" {
			require.Equal(t, before, pre.Engine().Stats().RequestSuccess, "the refused prefiller was contacted")
		}
		stop()
		http.DefaultClient.CloseIdleConnections()
	}
}
