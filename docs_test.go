package kvroute

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// unshippedReference matches a comment that sends the reader to a document
// a `go get` user does not have: the team's reference notes, by file name,
// or an unnamed "deployment guide".
var unshippedReference = regexp.MustCompile(
	`spec/[A-Za-z0-9_-]+\.md` +
		`|\b(routing|wire|zmq|render|metrics|design|peer-policies)\.md\b` +
		`|(?i:\bthe\s+deployment\s+guide)`)

// TestCommentsStandAlone holds every comment of every Go file in the module
// tree (the contrib modules and the examples included) to the rule that doc
// comments state facts in their own words: a comment citing one of the
// reference notes the module does not ship, or an unnamed deployment
// guide, fails with the file and line.
func TestCommentsStandAlone(t *testing.T) {
	var bad []string
	files := 0
	err := walkModuleFiles(func(path string) error {
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, group := range f.Comments {
			for _, c := range group.List {
				if m := unshippedReference.FindString(c.Text); m != "" {
					bad = append(bad, fset.Position(c.Pos()).String()+": "+m)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk must see the module's Go files")
	require.Empty(t, bad, "comments must state the facts, not cite files a go get user does not have")
}

// TestUnshippedReferencePattern pins what the check catches and what it lets
// through, so that a loosened pattern cannot pass the check vacuously.
func TestUnshippedReferencePattern(t *testing.T) {
	for _, s := range []string{
		"// see spec/wi" + "re.md §2.5",
		"// (routing" + ".md §3.1)",
		"// the design" + ".md targets",
		"// spec/peer-" + "policies.md",
		"// as in the deployment" + " guide",
		"// The Deployment" + " Guide's values",
	} {
		require.True(t, unshippedReference.MatchString(s), s)
	}
	for _, s := range []string{
		"// writes bench/RESULTS.md",
		"// see bench/README.md and bench/results/routesim.md",
		"// llm-d's precise prefix-cache routing guide",
		"// kvroute's rendering of the prompt",
	} {
		require.False(t, unshippedReference.MatchString(s), s)
	}
}

// TestREADMEPackagesTableListsEachPackageOnce: a package the README's
// "Packages" table names twice tells the reader two stories of what it owns.
func TestREADMEPackagesTableListsEachPackageOnce(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(readme), "\n## Packages\n")
	require.True(t, ok, "the README has a Packages section")
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile("(?m)^\\| \\[?`([^`]+)`")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		require.False(t, seen[m[1]], "the Packages table lists %s twice", m[1])
		seen[m[1]] = true
	}
	require.Greater(t, len(seen), 10, "the Packages table's rows were found")
}
