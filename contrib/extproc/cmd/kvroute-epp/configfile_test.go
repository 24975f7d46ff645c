package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// --config-file is the llm-d router picker's name for --config, and
// --config-text gives the same configuration inline; two of the three
// together are an error naming both.
func TestConfigFileAndConfigTextFlags(t *testing.T) {
	f, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--config-file", "/config/epp.yaml"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "/config/epp.yaml", f.configPath)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--config", "a.yaml", "--config-file", "b.yaml"}, []string{"--config ", "--config-file"}},
		{[]string{"--config-text", "model: m", "--config", "a.yaml"}, []string{"--config-text", "--config "}},
		{[]string{"--config-text", "model: m", "--config-file", "a.yaml"}, []string{"--config-text", "--config-file"}},
	} {
		_, err := parseFlags(append([]string{"--endpoints", "10.0.0.1:8000"}, c.args...), io.Discard)
		require.Error(t, err, c.args)
		for _, w := range c.want {
			require.ErrorContains(t, err, w, c.args)
		}
	}
}

// The guide's whole EndpointPickerConfig given inline with --config-text is
// read exactly as the same file given with --config-file or --config: the
// same router configuration, the same settings not carried over logged,
// and under --strict-config the same refusal, naming the flag.
func TestConfigTextReadsAsTheFileWould(t *testing.T) {
	path := guidePickerConfig(t)
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	fromFile, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--config-file", path}, io.Discard)
	require.NoError(t, err)
	want, err := loadFlagsConfig(fromFile, log)
	require.NoError(t, err)
	fromText, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--config-text", string(text)}, io.Discard)
	require.NoError(t, err)
	got, err := loadFlagsConfig(fromText, log)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, "Qwen/Qwen3-32B", got.Config.Model)

	defer leakcheck.Check(t)()
	for _, args := range [][]string{{"--config-file", path}, {"--config-text", string(text)}} {
		err = run(context.Background(), append([]string{"--endpoints", "10.0.0.1:8000", "--strict-config"}, args...), io.Discard, io.Discard)
		require.ErrorContains(t, err, "strict: 4 llm-d settings are not carried over", args[0])
		require.ErrorContains(t, err, "plugins[endpoint-notification-source]: ignored: not needed", args[0])
	}
	err = run(context.Background(), []string{"--endpoints", "10.0.0.1:8000", "--config-text", "model: m\nnoSuchKey: 1\n"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--config-text")
	require.ErrorContains(t, err, "noSuchKey")
}

// A --config (or --config-file) that cannot be read or decoded is refused
// naming the flag, as every other configuration flag's error does; it used
// to say "open /x.yaml: no such file or directory" or "/x.yaml: kvroute:
// invalid config: ..." alone.
func TestConfigFileErrorsNameTheFlag(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "router.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("speculative: {tll: 2s}\n"), 0o600))
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, flag := range []string{"--config", "--config-file"} {
		for path, want := range map[string]string{missing: "no such file", bad: "speculative.tll: unknown key"} {
			f, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", flag, path}, io.Discard)
			require.NoError(t, err)
			_, _, err = loadConfigStages(f, slog.New(slog.DiscardHandler))
			require.ErrorContains(t, err, "--config "+path+": ", flag)
			require.ErrorContains(t, err, want, flag)
		}
	}
}
