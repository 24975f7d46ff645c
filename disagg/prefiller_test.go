package disagg

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg/sidecar"
)

// The prefiller header names where the prefill endpoint's requests go: its
// ID without an Address, else the Address's host:port (the scheme's
// default port when it names none, the path prefix left out), a value the
// decode pod's sidecar takes as a target rather than a bad_target.
func TestPrefillerHostPort(t *testing.T) {
	for _, tc := range []struct {
		ep   kvroute.Endpoint
		want string
	}{
		{kvroute.Endpoint{ID: "10.0.0.1:8000"}, "10.0.0.1:8000"},
		{kvroute.Endpoint{ID: "[fd00::1]:8000"}, "[fd00::1]:8000"},
		{kvroute.Endpoint{ID: "prefill-a", Address: "http://pod-a:9000"}, "pod-a:9000"},
		{kvroute.Endpoint{ID: "10.0.0.1:8000", Address: "http://pod-a:9000/"}, "pod-a:9000"},
		{kvroute.Endpoint{ID: "prefill-a", Address: "http://pod-a:9000/engine/v1/"}, "pod-a:9000"},
		{kvroute.Endpoint{ID: "prefill-a", Address: "https://pod-a"}, "pod-a:443"},
		{kvroute.Endpoint{ID: "prefill-a", Address: "http://pod-a"}, "pod-a:80"},
		{kvroute.Endpoint{ID: "prefill-a", Address: "http://[fd00::1]:9000"}, "[fd00::1]:9000"},
		{kvroute.Endpoint{ID: "10.0.0.1:8000", Address: "%zz"}, "10.0.0.1:8000"},
	} {
		got := PrefillerHostPort(tc.ep)
		require.Equal(t, tc.want, got, "%+v", tc.ep)
		require.True(t, sidecar.ValidTarget(got), "%+v: %q", tc.ep, got)
	}
}
