package checkpoint

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The configs decode strictly on their own too (as kvroute's configuration
// decodes them): duration strings, unknown keys and bare numbers refused
// with their path, and what MarshalJSON writes reads back.
func TestConfigJSON(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"path":"/tmp/x","interval":"45s"}`), &c))
	require.Equal(t, Config{Path: "/tmp/x", Interval: 45 * time.Second}, c)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"interval":60}`), &c), "interval: bare number")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"pathx":"/tmp/c"}`), &c), "pathx: unknown key")

	var b BootstrapConfig
	require.NoError(t, json.Unmarshal([]byte(`{"peers":["http://p:9091/kvroute/snapshot"],"timeout":"1m30s","progressTimeout":"750ms","maxSectionBytes":1048576,"maxClockSkew":"10s"}`), &b))
	require.Equal(t, 90*time.Second, b.Timeout)
	require.Equal(t, 10*time.Second, b.MaxClockSkew)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"maxClockSkew":30}`), &BootstrapConfig{}), "maxClockSkew: bare number")
	require.Equal(t, 750*time.Millisecond, b.ProgressTimeout)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"Token":"s"}`), &b), "Token: unknown key")
	data, err := json.Marshal(b)
	require.NoError(t, err)
	require.Contains(t, string(data), `"timeout":"1m30s"`)
	var back BootstrapConfig
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, b, back)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	require.NoError(t, Config{Path: filepath.Join(t.TempDir(), "c")}.Validate())
	require.ErrorContains(t, Config{Path: "/nonexistent-dir-kvroute/x.ckpt"}.Validate(), `path "/nonexistent-dir-kvroute/x.ckpt": directory does not exist`)
	require.NoError(t, BootstrapConfig{Peers: []string{"https://p:9091/kvroute/snapshot"}}.Validate())
	for b, want := range map[*BootstrapConfig]string{
		{Peers: []string{"10.0.0.1:9091"}}: `peers: "10.0.0.1:9091" is not an http(s) URL`,
		{Peers: []string{"http://bücher.example:9091/snap"}}: `peers: "http://bücher.example:9091/snap": write its host in ASCII ` +
			`(an international name in its punycode form, xn--...), the form the Host header carries`,
		{Timeout: -1}:           "timeout -1ns is negative",
		{ProgressTimeout: -1}:   "progressTimeout -1ns is negative",
		{ServeWriteTimeout: -1}: "serveWriteTimeout -1ns is negative",
		{ServeMinRate: -1}:      "serveMinRate -1 is negative",
		{MaxClockSkew: -1}:      "maxClockSkew -1ns is negative",
		{MaxSectionBytes: -1}:   "maxSectionBytes -1 is negative",
	} {
		require.EqualError(t, b.Validate(), want)
	}
}

// A token no HTTP request can carry is refused, naming the key: a bearer
// token read from a secret with its trailing newline ("tok\n") or spaces
// around it made every peer request fail before it left (Go's client sends
// no header value with a control character) and every request to this
// router's handler unauthorized (a server trims the spaces), so that no
// replica ever bootstrapped from another.
func TestBootstrapTokenAHeaderCannotCarryIsRefused(t *testing.T) {
	for _, tok := range []string{"s3cr3t\n", "s3cr3t\r\n", " s3cr3t", "s3cr3t ", "s3\x00cr3t", "s3\x7fcr3t", "\ts3cr3t"} {
		err := BootstrapConfig{Token: tok}.Validate()
		require.Error(t, err, "%q", tok)
		require.ErrorContains(t, err, "token")
		require.NotContains(t, err.Error(), "cr3t", "the error does not print the secret")
	}
	for _, tok := range []string{"", "s3cr3t", "a.b-c_d~e+f/g==", "with inner space!", "inner\ttab"} {
		require.NoError(t, BootstrapConfig{Token: tok}.Validate(), "%q", tok)
	}
}

// A path that names a directory (a volume's mount point given for the
// file) is refused at start: every checkpoint write would fail renaming
// its file over the directory, and the restore would read the directory.
func TestCheckpointPathThatIsADirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir, dir + "/"} {
		require.ErrorContains(t, Config{Path: p}.Validate(), "is a directory", "%q", p)
	}
	require.NoError(t, Config{Path: filepath.Join(dir, "index.ckpt")}.Validate())
}
