package kvroute

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// declaredDefault is one constant or variable named Default… (or default…)
// in the workspace's non-test sources.
type declaredDefault struct {
	dir, name, value string
}

// workspaceDefaults parses every non-test Go file under the workspace root
// (this module and the contrib and deploy modules) and lists its
// package-level constants and variables whose name starts with "default".
func workspaceDefaults(t *testing.T) []declaredDefault {
	t.Helper()
	var out []declaredDefault
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(strings.ToLower(name.Name), "default") {
						continue
					}
					value := ""
					if i < len(vs.Values) {
						value = exprString(vs.Values[i])
					}
					out = append(out, declaredDefault{dir: filepath.ToSlash(filepath.Dir(path)), name: name.Name, value: value})
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// exprString renders an expression as source, enough to tell a literal
// from a reference to another package's constant.
func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.Ident:
		return x.Name
	case *ast.BasicLit:
		return x.Value
	case *ast.BinaryExpr:
		return exprString(x.X) + " " + x.Op.String() + " " + exprString(x.Y)
	case *ast.ParenExpr:
		return "(" + exprString(x.X) + ")"
	}
	return "…"
}

// TestEachDefaultIsDeclaredOnce holds the configuration's defaults to one
// declaration each, in the package that owns the setting: a constant of the
// same setting anywhere else must refer to the owner's (pkg.DefaultX), never
// repeat its value. Settings of other components that happen to share a name
// (the replay client's idle timeout, the gateway's HTTP idle timeout) are
// listed as such.
func TestEachDefaultIsDeclaredOnce(t *testing.T) {
	decls := workspaceDefaults(t)
	for _, tc := range []struct {
		setting string
		name    *regexp.Regexp // the constants of this setting
		owner   string         // the directory of the owning package
		others  []string       // directories where the name is another setting
	}{
		{"block size", regexp.MustCompile(`(?i)^default_?blocksize$`), "kvindex", nil},
		{"speculative TTL", regexp.MustCompile(`(?i)^defaultspeculativettl$`), "kvindex", nil},
		{"events port", regexp.MustCompile(`(?i)^defaulteventsport$`), "kvevents", nil},
		{"replay port", regexp.MustCompile(`(?i)^defaultreplayport$`), "kvevents", nil},
		{"event workers", regexp.MustCompile(`(?i)^defaultconcurrency$`), "kvevents",
			[]string{"replay", "enginemetrics", "kvevents/snapshot"}}, // the process-wide replay slots, the scrapes in flight, the snapshot loads at once
		{"idle timeout", regexp.MustCompile(`(?i)^defaultidletimeout$`), "kvevents",
			[]string{"replay", "gateway", "internal/h1pool"}}, // the replay client's, the HTTP server's and the HTTP client's idle connections
		{"topic filter", regexp.MustCompile(`(?i)^defaulttopicfilter$`), ".", nil},
		{"render attempt timeout", regexp.MustCompile(`(?i)^defaultattempttimeout$`), "render",
			[]string{"kvevents/snapshot"}}, // one snapshot request's deadline
		{"render concurrency limit", regexp.MustCompile(`(?i)^defaultmaxconcurrency$`), "render", nil},
		{"render queue wait", regexp.MustCompile(`(?i)^defaultmaxqueuewait$`), "render", nil},
		{"queue threshold", regexp.MustCompile(`(?i)^defaultqueuethresholdtokens$`), "tokenload", nil},
		{"open request tokens", regexp.MustCompile(`(?i)^defaultopenrequesttokens$`), "tokenload", nil},
		{"affinity threshold", regexp.MustCompile(`(?i)^defaultaffinitythreshold$`), "affinity", nil},
		{"TTFT penalty", regexp.MustCompile(`(?i)^defaultmaxttftpenalty$`), "affinity", nil},
		{"peak prefill throughput", regexp.MustCompile(`(?i)^defaultpeakprefillthroughput$`), "affinity", nil},
		{"load weight", regexp.MustCompile(`(?i)^defaultloadweight$`), ".", nil},
		{"readiness give-up", regexp.MustCompile(`(?i)^defaultgiveupafter$`), ".", nil},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			owned := 0
			for _, d := range decls {
				if !tc.name.MatchString(d.name) {
					continue
				}
				switch {
				case d.dir == tc.owner:
					owned++
				case contains(tc.others, d.dir):
				case refersToConstant.MatchString(d.value):
					// passes the owner's constant down
				default:
					t.Errorf("%s/%s = %s declares the %s again; refer to %s's constant", d.dir, d.name, d.value, tc.setting, tc.owner)
				}
			}
			require.NotZero(t, owned, "the owner %s declares no constant for the %s", tc.owner, tc.setting)
		})
	}
}

// refersToConstant matches a value that is another package's constant.
var refersToConstant = regexp.MustCompile(`^\w+\.Default\w+$`)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
