package gateway

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
)

func TestParseEndpoints(t *testing.T) {
	eps, err := ParseEndpoints(" 10.0.0.1:8000, 10.0.0.2:8000 ,")
	require.NoError(t, err)
	require.Equal(t, []kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}}, eps)
	require.Equal(t, "http://10.0.0.1:8000", eps[0].URL())

	for _, bad := range []string{"", ",", "10.0.0.1", "10.0.0.1:http", ":8000", "10.0.0.1:0", "a:1,a:1", "10.0.0.1:70000"} {
		_, err := ParseEndpoints(bad)
		require.ErrorIs(t, err, ErrInvalidEndpoints, bad)
	}
}

func TestLoadEndpoints(t *testing.T) {
	eps, err := LoadEndpoints(strings.NewReader(`[
		{"id": "10.0.0.7:8000", "labels": {"zone": "a"}},
		{"id": "10.0.0.8:8000", "address": "https://vllm-b.internal:8443"}]`))
	require.NoError(t, err)
	require.Equal(t, []kvroute.Endpoint{
		{ID: "10.0.0.7:8000", Labels: map[string]string{"zone": "a"}},
		{ID: "10.0.0.8:8000", Address: "https://vllm-b.internal:8443"},
	}, eps)

	for name, bad := range map[string]string{
		"unknown key":     `[{"id":"10.0.0.7:8000","port":1}]`,
		"not an array":    `{"id":"10.0.0.7:8000"}`,
		"empty":           `[]`,
		"trailing data":   `[{"id":"10.0.0.7:8000"}] []`,
		"bad address":     `[{"id":"10.0.0.7:8000","address":"ftp://x"}]`,
		"missing id":      `[{"address":"http://x:1"}]`,
		"duplicate id":    `[{"id":"h:1"},{"id":"h:1"}]`,
		"truncated":       `[{"id":`,
		"labels not strs": `[{"id":"h:1","labels":{"a":1}}]`,
		// encoding/json alone would take these: a closing bracket after
		// the array, a case variant of a key, a repeated key merged.
		"trailing bracket": `[{"id":"10.0.0.7:8000"}]]`,
		"trailing brace":   `[{"id":"10.0.0.7:8000"}]}`,
		"case variant key": `[{"ID":"10.0.0.7:8000"}]`,
		"repeated labels":  `[{"id":"10.0.0.7:8000","labels":{"zone":"a"},"labels":{"rack":"b"}}]`,
	} {
		_, err := LoadEndpoints(strings.NewReader(bad))
		require.ErrorIs(t, err, ErrInvalidEndpoints, name)
	}
	_, err = LoadEndpoints(strings.NewReader(`[{"id":"10.0.0.7:8000"},{"ID":"10.0.0.8:8000"}]`))
	require.ErrorContains(t, err, `[1].ID: unknown key`, "the error names the entry and the key")
}

// TestLoadEndpointsExactKeys: the file's keys are matched exactly, as in
// every kvroute configuration: encoding/json would take "ID" or "Labels" for
// "id" and "labels", and a key given twice would keep its last value.
func TestLoadEndpointsExactKeys(t *testing.T) {
	for name, tc := range map[string]struct{ doc, key string }{
		"upper-case id":     {`[{"id":"h:1"},{"ID":"h:2"}]`, "[1].ID"},
		"capitalised label": {`[{"id":"h:1","Labels":{"zone":"a"}}]`, "[0].Labels"},
		"mixed-case role":   {`[{"id":"h:1","rOLE":"decode"}]`, "[0].rOLE"},
		"id given twice":    {`[{"id":"h:1","id":"h:2"}]`, "[0].id"},
	} {
		_, err := LoadEndpoints(strings.NewReader(tc.doc))
		require.ErrorIs(t, err, ErrInvalidEndpoints, name)
		require.ErrorContains(t, err, tc.key, name)
	}
}

// TestLoadEndpointsLabels: an endpoint's labels are held to what Kubernetes
// takes on a pod, and a refusal names the endpoint and the label.
func TestLoadEndpointsLabels(t *testing.T) {
	eps, err := LoadEndpoints(strings.NewReader(`[{"id":"h:1","labels":{"app.kubernetes.io/name":"vllm","llm-d.ai/role":"decode","empty":"","A_b.c-9":"x.Y_z-0"}}]`))
	require.NoError(t, err)
	require.Len(t, eps[0].Labels, 4)
	for name, tc := range map[string]struct{ doc, want string }{
		"empty key":           {`[{"id":"h:1","labels":{"":"a"}}]`, `endpoint h:1: label key "" has an empty name`},
		"space in key":        {`[{"id":"h:1","labels":{"my zone":"a"}}]`, `label key "my zone"`},
		"key ends in dash":    {`[{"id":"h:1","labels":{"zone-":"a"}}]`, `label key "zone-"`},
		"two slashes":         {`[{"id":"h:1","labels":{"a/b/c":"x"}}]`, `label key "a/b/c" has more than one '/'`},
		"upper-case prefix":   {`[{"id":"h:1","labels":{"Example.com/zone":"a"}}]`, `prefix is not a lower-case DNS subdomain`},
		"empty prefix":        {`[{"id":"h:1","labels":{"/zone":"a"}}]`, `has an empty prefix`},
		"long name":           {`[{"id":"h:1","labels":{"` + strings.Repeat("k", 64) + `":"a"}}]`, `name is longer than 63 bytes`},
		"slash in value":      {`[{"id":"h:2"},{"id":"h:1","labels":{"model":"org/model"}}]`, `endpoint h:1: label model: value "org/model"`},
		"long value":          {`[{"id":"h:1","labels":{"zone":"` + strings.Repeat("v", 64) + `"}}]`, `is longer than 63 bytes`},
		"newline in value":    {`[{"id":"h:1","labels":{"zone":"a\nb"}}]`, `label zone: value "a\nb"`},
		"non-ASCII value":     {`[{"id":"h:1","labels":{"zone":"zoné"}}]`, `label zone: value "zoné"`},
		"value ends in a dot": {`[{"id":"h:1","labels":{"zone":"a."}}]`, `label zone: value "a."`},
	} {
		_, err := LoadEndpoints(strings.NewReader(tc.doc))
		require.ErrorIs(t, err, ErrInvalidEndpoints, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestLoadEndpointsIDBound: an endpoint ID is a label value of the
// per-endpoint metrics, so a host longer than a DNS name is refused with an
// error naming the entry, and the error does not carry the whole ID.
func TestLoadEndpointsIDBound(t *testing.T) {
	longest := strings.Repeat("a", 253) + ":8000"
	eps, err := LoadEndpoints(strings.NewReader(`[{"id":"` + longest + `"}]`))
	require.NoError(t, err)
	require.Equal(t, longest, eps[0].ID)

	huge := strings.Repeat("h", 1<<20) + ":8000"
	_, err = LoadEndpoints(strings.NewReader(`[{"id":"10.0.0.7:8000"},{"id":"` + huge + `"}]`))
	require.ErrorIs(t, err, ErrInvalidEndpoints)
	require.ErrorContains(t, err, "[1]: endpoint id")
	require.ErrorContains(t, err, "over 259")
	require.Less(t, len(err.Error()), 300, "the error shows a cut of the id, not all of it")

	_, err = ParseEndpoints("10.0.0.7:8000," + huge)
	require.ErrorIs(t, err, ErrInvalidEndpoints)
	require.ErrorContains(t, err, "[1]: endpoint id")
}

// TestLoadEndpointsSockets: an entry's rank and KV-event socket addresses
// are checked when the file is loaded, as the router checks them when it
// subscribes, with an error naming the entry and the key.
func TestLoadEndpointsSockets(t *testing.T) {
	eps, err := LoadEndpoints(strings.NewReader(`[{"id":"10.0.0.7:8000","rank":3,"eventsAddress":"tcp://10.0.0.7:6001",
		"replayAddress":"tcp://10.0.0.7:6002","snapshotAddress":"10.0.0.7:6003"},{"id":"10.0.0.8:8000","rank":65535}]`))
	require.NoError(t, err)
	require.Equal(t, 3, eps[0].Rank)
	require.Equal(t, "tcp://10.0.0.7:6001", eps[0].EventsAddress)
	for name, tc := range map[string]struct{ doc, want string }{
		"negative rank":    {`[{"id":"h:1"},{"id":"h:2","rank":-1}]`, "endpoint h:2: negative rank -1"},
		"rank past a port": {`[{"id":"h:1","rank":65536}]`, "endpoint h:1: rank 65536 is over 65535, so eventsAddress cannot be derived from it: give eventsAddress"},
		"events scheme":    {`[{"id":"h:1","eventsAddress":"ipc:///tmp/kv"}]`, `endpoint h:1: eventsAddress: zmqx: unsupported scheme "ipc"`},
		"events no port":   {`[{"id":"h:1","eventsAddress":"tcp://10.0.0.7"}]`, `endpoint h:1: eventsAddress: zmqx: bad address "tcp://10.0.0.7"`},
		"events big port":  {`[{"id":"h:1","eventsAddress":"tcp://10.0.0.7:70000"}]`, `endpoint h:1: eventsAddress: zmqx: bad address "tcp://10.0.0.7:70000": port "70000"`},
		"replay address":   {`[{"id":"h:1","replayAddress":"tcp://x:y"}]`, `endpoint h:1: replayAddress: zmqx: bad address "tcp://x:y"`},
		"snapshot address": {`[{"id":"h:1","snapshotAddress":"udp://x:1"}]`, `endpoint h:1: snapshotAddress: zmqx: unsupported scheme "udp"`},
	} {
		_, err := LoadEndpoints(strings.NewReader(tc.doc))
		require.ErrorIs(t, err, ErrInvalidEndpoints, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestLoadEndpointsLargeRank: a rank only offsets the ports of the socket
// addresses derived from it, so a rank past a port is taken when the entry
// names its eventsAddress (the one address always derived when missing);
// the replay and snapshot addresses are derived only when the router's
// configuration turns them on, and the router refuses a port past 65535
// then, naming the address.
func TestLoadEndpointsLargeRank(t *testing.T) {
	eps, err := LoadEndpoints(strings.NewReader(`[{"id":"10.0.0.7:8000","rank":70000,"eventsAddress":"tcp://10.0.0.7:6001",
		"replayAddress":"tcp://10.0.0.7:6002","snapshotAddress":"tcp://10.0.0.7:6003"},
		{"id":"10.0.0.8:8000","rank":1000000,"eventsAddress":"tcp://10.0.0.8:6001"}]`))
	require.NoError(t, err)
	require.Equal(t, 70000, eps[0].Rank)
	require.Equal(t, 1000000, eps[1].Rank)

	_, err = LoadEndpoints(strings.NewReader(`[{"id":"10.0.0.7:8000","rank":70000,
		"replayAddress":"tcp://10.0.0.7:6002","snapshotAddress":"tcp://10.0.0.7:6003"}]`))
	require.ErrorIs(t, err, ErrInvalidEndpoints)
	require.ErrorContains(t, err, "endpoint 10.0.0.7:8000: rank 70000 is over 65535, so eventsAddress cannot be derived from it: give eventsAddress")
}
