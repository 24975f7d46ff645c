package kvroute

import (
	"errors"
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
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

	// Every library package of the workspace is in the table: a row of its
	// own, or named in its parent's row by its path or its last element
	// (`gatewaycmd`, `otlptest`).
	for _, p := range workspacePackages(t) {
		rel, ok := libraryPackage(p)
		if !ok {
			continue
		}
		if !strings.Contains(table, "`"+rel+"`") && !strings.Contains(table, "`"+path.Base(rel)+"`") {
			t.Errorf("the README's Packages table does not name %s", rel)
		}
	}
}

// modulePath is the root module's import path, which every package path
// the root package doc names is relative to.
const modulePath = "github.com/kvroute/kvroute"

// packageListItem matches the start of an item of doc.go's Packages list:
// the package's path relative to modulePath, then a colon.
var packageListItem = regexp.MustCompile(`^([a-z][a-z0-9]*(?:/[a-z][a-z0-9]*)*): `)

// docPackageList returns the package paths named by the list items of the
// "Packages" section of a package comment, in order, and an error for a
// comment without that section or an item there that does not open with a
// package path.
func docPackageList(text string) ([]string, error) {
	var p comment.Parser
	in, found := false, false
	var named []string
	for _, block := range p.Parse(text).Content {
		switch b := block.(type) {
		case *comment.Heading:
			in = plainText(b.Text) == "Packages"
			found = found || in
		case *comment.List:
			if !in {
				continue
			}
			for _, item := range b.Items {
				var first string
				if len(item.Content) > 0 {
					if para, ok := item.Content[0].(*comment.Paragraph); ok {
						first = plainText(para.Text)
					}
				}
				m := packageListItem.FindStringSubmatch(first)
				if m == nil {
					return nil, fmt.Errorf("an item of the Packages list does not open with a package path and a colon: %.60q", first)
				}
				named = append(named, m[1])
			}
		}
	}
	if !found {
		return nil, errors.New("the package comment has no Packages section")
	}
	return named, nil
}

// plainText joins the plain text of a parsed doc comment span.
func plainText(text []comment.Text) string {
	var b strings.Builder
	for _, t := range text {
		if s, ok := t.(comment.Plain); ok {
			b.WriteString(string(s))
		}
	}
	return b.String()
}

// libraryPackage returns p's path relative to modulePath when p is a
// package a user imports: not the root package itself, not a command, and
// not under internal/, bench/ or examples/ (which doc.go names as
// directories, not package by package).
func libraryPackage(p listedPackage) (string, bool) {
	rel, ok := strings.CutPrefix(p.ImportPath, modulePath+"/")
	if !ok || p.Name == "main" {
		return "", false
	}
	parts := strings.Split(rel, "/")
	if parts[0] == "bench" || parts[0] == "examples" || slices.Contains(parts, "internal") {
		return "", false
	}
	return rel, true
}

// packageListViolations compares the packages a package list names with
// the library packages that exist: each must be named once, and nothing
// else.
func packageListViolations(named, libraries []string) []string {
	var bad []string
	count := map[string]int{}
	for _, n := range named {
		count[n]++
		if count[n] == 2 {
			bad = append(bad, n+": named twice")
		}
	}
	exists := map[string]bool{}
	for _, l := range libraries {
		exists[l] = true
		if count[l] == 0 {
			bad = append(bad, l+": a library package the list does not name")
		}
	}
	for n := range count {
		if !exists[n] {
			bad = append(bad, n+": named, but no library package has that path")
		}
	}
	sort.Strings(bad)
	return bad
}

// TestPackageDocNamesEveryLibraryPackage holds the root package doc's
// Packages list, where a new user reading go doc learns what to import, to
// the packages of every workspace module: a package added, moved or
// removed without its line there fails with its path.
func TestPackageDocNamesEveryLibraryPackage(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	require.NoError(t, err)
	require.NotNil(t, f.Doc, "doc.go carries the package comment")
	named, err := docPackageList(f.Doc.Text())
	require.NoError(t, err)
	var libraries []string
	for _, p := range workspacePackages(t) {
		if rel, ok := libraryPackage(p); ok {
			libraries = append(libraries, rel)
		}
	}
	require.Greater(t, len(libraries), 30, "the walk must see every library package of the workspace")
	require.Contains(t, libraries, "kvevents/wire")
	require.Contains(t, libraries, "contrib/extproc")
	if bad := packageListViolations(named, libraries); len(bad) > 0 {
		t.Errorf("doc.go's Packages list must name every library package once, and nothing else:\n%s",
			strings.Join(bad, "\n"))
	}
}

// TestPackageListChecks pins what the package-list check parses and
// catches, so that a check that finds nothing cannot pass vacuously.
func TestPackageListChecks(t *testing.T) {
	named, err := docPackageList("Intro.\n\n  - kvindex: not this list.\n\n# Packages\n\nCore:\n\n" +
		"  - kvindex: the index.\n  - kvevents/wire: the codec,\n    on two lines.\n\nMore:\n\n  - gateway: a proxy.\n\n" +
		"# Errors\n\n  - ErrX: 404.\n")
	require.NoError(t, err)
	require.Equal(t, []string{"kvindex", "kvevents/wire", "gateway"}, named)
	_, err = docPackageList("# Packages\n\n  - the kvindex package: the index.\n")
	require.ErrorContains(t, err, "does not open with a package path")
	_, err = docPackageList("Intro.\n\n  - kvindex: the index.\n")
	require.ErrorContains(t, err, "no Packages section")

	for _, c := range []struct{ path, name, want string }{
		{modulePath + "/kvevents/wire", "wire", "kvevents/wire"},
		{modulePath + "/contrib/otel/otlpenv", "otlpenv", "contrib/otel/otlpenv"},
		{modulePath, "kvroute", ""},
		{modulePath + "/cmd/simengine", "main", ""},
		{modulePath + "/internal/zmqx", "zmqx", ""},
		{modulePath + "/kvevents/internal/wiretest", "wiretest", ""},
		{modulePath + "/bench", "bench", ""},
		{modulePath + "/examples/demo/scenario", "scenario", ""},
	} {
		rel, ok := libraryPackage(listedPackage{ImportPath: c.path, Name: c.name})
		require.Equal(t, c.want, rel, c.path)
		require.Equal(t, c.want != "", ok, c.path)
	}

	require.Equal(t, []string{
		"gone: named, but no library package has that path",
		"kvindex: named twice",
		"render: a library package the list does not name",
	}, packageListViolations([]string{"kvindex", "gone", "kvindex", "kvevents"}, []string{"kvindex", "kvevents", "render"}))
}
