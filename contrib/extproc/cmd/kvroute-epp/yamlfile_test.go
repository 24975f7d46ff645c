package main

import (
	"log/slog"
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

// TestReadYAMLOrJSONRefusesSeveralDocuments: a stage's configuration file
// (--admission-config and the others) of more than one YAML document is
// refused naming the file, as the gateway and --config refuse it: only the
// first was read, so the settings after a "---" were dropped without a word.
// An empty document (a leading or trailing "---") does not count.
func TestReadYAMLOrJSONRefusesSeveralDocuments(t *testing.T) {
	dir := t.TempDir()
	for i, doc := range []string{
		"queueTimeout: 2s\n---\nmaxQueue: 8\n",
		"queueTimeout: 2s\n---\nbogus: 1\n",
		"queueTimeout: 2s\n---\nmaxQueue: [unclosed\n",
	} {
		path := filepath.Join(dir, "admission"+string(rune('a'+i))+".yaml")
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
		_, err := readYAMLOrJSON(path)
		require.ErrorContains(t, err, path, doc)
	}
	_, err := readYAMLOrJSON(filepath.Join(dir, "admissiona.yaml"))
	require.ErrorContains(t, err, "more than one document")
	ok := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(ok, []byte("---\nqueueTimeout: 2s\n---\n"), 0o600))
	js, err := readYAMLOrJSON(ok)
	require.NoError(t, err)
	require.JSONEq(t, `{"queueTimeout": "2s"}`, string(js))
}

// TestConfigFileRefusesSeveralDocuments: --config (llmd.LoadResult) of more
// than one YAML document is refused naming the file.
func TestConfigFileRefusesSeveralDocuments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.yaml")
	require.NoError(t, os.WriteFile(path, []byte("model: m\n---\nblockSize: 16\n"), 0o600))
	_, err := loadConfigResult(path, "", false, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "more than one document")
}
