package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadYAMLOrJSONRefusesRepeatedKeys: a key given twice in a stage's
// configuration file (YAML, or JSON read as YAML) is an error naming it, as
// in every kvroute configuration, not its last value silently winning.
func TestReadYAMLOrJSONRefusesRepeatedKeys(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"yaml": "queueTimeout: 2s\nqueueTimeout: 30s\n",
		"json": `{"queueTimeout": "2s", "queueTimeout": "30s"}`,
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
		_, err := readYAMLOrJSON(path)
		require.ErrorContains(t, err, "queueTimeout", name)
	}
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("queueTimeout: 2s\nmaxQueue: 8\n"), 0o600))
	js, err := readYAMLOrJSON(good)
	require.NoError(t, err)
	require.JSONEq(t, `{"queueTimeout": "2s", "maxQueue": 8}`, string(js))
}

// TestReadYAMLOrJSONIsBounded: a file larger than a configuration can be is
// refused without being read whole.
func TestReadYAMLOrJSONIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, []byte("a: "+strings.Repeat("x", maxConfigFile)+"\n"), 0o600))
	_, err := readYAMLOrJSON(path)
	require.ErrorContains(t, err, "larger than")
}
