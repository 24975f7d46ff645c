package gatewaycmd

import (
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeConfigBlock matches a YAML or JSON block of the README and its text.
var readmeConfigBlock = regexp.MustCompile("(?s)```(?:yaml|json)\n(.*?)```")

// TestREADMEConfigBlocksLoad gives every YAML and JSON block of the README,
// each a configuration a reader may copy into the --config file (kvroute's
// keys with a gateway section, or an llm-d EndpointPickerConfig), to the
// gateway's flags with --strict-config: each loads, unknown keys, wrong
// types and llm-d settings kvroute does not carry over being errors.
func TestREADMEConfigBlocksLoad(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	blocks := readmeConfigBlock.FindAllStringSubmatchIndex(text, -1)
	require.GreaterOrEqual(t, len(blocks), 8, "the README gives configuration blocks")
	for _, m := range blocks {
		line := strconv.Itoa(strings.Count(text[:m[0]], "\n") + 1)
		cfg := writeFile(t, "config.yaml", text[m[2]:m[3]])
		_, err := parseFlags([]string{"--config", cfg, "--strict-config", "--endpoints", "10.0.0.7:8000", "--model", "m"}, io.Discard, io.Discard)
		require.NoError(t, err, "README.md:%s:\n%s", line, text[m[2]:m[3]])
	}
}
