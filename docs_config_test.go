package kvroute

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docConfigKey matches a backquoted key path of the Router's configuration
// under one of its sections, such as `events.publisherSilence`.
var docConfigKey = regexp.MustCompile("`((?:accuracy|affinity|bootstrap|checkpoint|cluster|events|index|metricLabels|" +
	"readiness|render|requests|speculative)(?:\\.[a-z][A-Za-z0-9]*)+)`")

// loadsKey reports whether kvroute.LoadConfig reads the dot-separated key
// path: a document setting it to null (which keeps the default) loads, and
// an unknown key is an error.
func loadsKey(path string) error {
	doc := "null"
	parts := strings.Split(path, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		doc = `{"` + parts[i] + `":` + doc + `}`
	}
	_, err := LoadConfig(strings.NewReader(doc))
	return err
}

// TestREADMEConfigKeysExist holds every configuration key path the READMEs
// give under a section of the Router's configuration to the keys
// kvroute.LoadConfig reads. A key set once at the top level and rejected
// under its sub-configuration (index.blockSize, events.model, ...) may be
// named only in a sentence that says it is an error.
func TestREADMEConfigKeysExist(t *testing.T) {
	rejected := map[string]bool{}
	for _, p := range passedDown {
		rejected[p.sub+"."+p.key] = true
	}
	var bad []string
	keys := 0
	for _, name := range []string{"README.md", "bench/README.md"} {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		text := string(src)
		for _, m := range docConfigKey.FindAllStringSubmatchIndex(text, -1) {
			keys++
			key := text[m[2]:m[3]]
			line := strings.Count(text[:m[0]], "\n") + 1
			sentence, _, _ := strings.Cut(text[m[1]:], ". ")
			switch {
			case rejected[key]:
				if !strings.Contains(sentence, "error") {
					bad = append(bad, fmt.Sprintf("%s:%d: %s is rejected: the top-level key sets it", name, line, key))
				}
			default:
				if err := loadsKey(key); err != nil {
					bad = append(bad, fmt.Sprintf("%s:%d: %s: %v", name, line, key, err))
				}
			}
		}
	}
	require.Greater(t, keys, 40, "the READMEs name configuration keys")
	require.Empty(t, bad, "the READMEs must name the configuration keys kvroute.LoadConfig reads")
}
