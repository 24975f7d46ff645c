package kvroute

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// flagDefiners are the flag.FlagSet methods that define a flag, with the
// position of the flag's name among their arguments.
var flagDefiners = map[string]int{
	"Bool": 0, "Duration": 0, "Float64": 0, "Int": 0, "Int64": 0, "String": 0, "Uint": 0, "Uint64": 0,
	"Func": 0, "BoolFunc": 0,
	"BoolVar": 1, "DurationVar": 1, "Float64Var": 1, "IntVar": 1, "Int64Var": 1, "StringVar": 1,
	"UintVar": 1, "Uint64Var": 1, "Var": 1, "TextVar": 1,
}

// codeFlags returns the name of every command-line flag the non-test code
// of the module tree defines: the calls of a flagDefiners method on the
// flag package or on a FlagSet named fs whose name is a string literal or
// a string constant, and the keys of a map literal held by a variable whose
// name ends in Flags (kvroute-epp's llmdIgnoredFlags, defined in a loop).
func codeFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	consts := map[string]string{}
	var names []ast.Expr
	err := walkModuleFiles(func(path string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, id := range vs.Names {
					if i >= len(vs.Values) {
						break
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[id.Name], _ = strconv.Unquote(lit.Value)
					}
					if m, ok := vs.Values[i].(*ast.CompositeLit); ok && strings.HasSuffix(id.Name, "Flags") {
						for _, e := range m.Elts {
							if kv, ok := e.(*ast.KeyValueExpr); ok {
								names = append(names, kv.Key)
							}
						}
					}
				}
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			recv, ok := sel.X.(*ast.Ident)
			at, defines := flagDefiners[sel.Sel.Name]
			if !ok || !defines || (recv.Name != "fs" && recv.Name != "flag") || len(call.Args) <= at {
				return true
			}
			names = append(names, call.Args[at])
			return true
		})
		return nil
	})
	require.NoError(t, err)
	for _, e := range names {
		switch e := e.(type) {
		case *ast.BasicLit:
			if name, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
				flags[name] = true
			}
		case *ast.Ident:
			if name, ok := consts[e.Name]; ok {
				flags[name] = true
			}
		}
	}
	return flags
}

// otherProgramsFlags are the flags the documents give of programs other
// than kvroute's (vLLM, Dynamo, llm-d, kubectl, helm, Redis, go test), the
// flag package's own -help, and the one flag-shaped example that is no
// flag, with what each belongs to.
var otherProgramsFlags = map[string]string{
	"allow-credentials":            "vLLM",
	"allowed-origins":              "vLLM",
	"default-mm-loras":             "vLLM",
	"enable-lora":                  "vLLM",
	"enable-prompt-tokens-details": "vLLM",
	"no-router-kv-events":          "Dynamo",
	"router-conditional-disagg":    "Dynamo",
	"patch-file":                   "kubectl patch",
	"skip-schema-validation":       "helm",
	"set":                          "helm install",
	"latency":                      "redis-cli",
	"appendonly":                   "redis-server",
	"save":                         "redis-server",
	"vllm-port":                    "llm-d's routing sidecar",
	"help":                         "the flag package, in every program",
	"bench":                        "go test",
	"benchmem":                     "go test",
	"race":                         "go test",
	"mode":                         "the chart README's example of a value YAML misreads (--mode=493)",
}

// docFlagSpan matches an inline code span of a document that starts with a
// flag: `--name`, `--name=value`, `--name value`, `-name`.
var docFlagSpan = regexp.MustCompile("`(--?[a-z][a-z0-9-]*)[ =`]")

// docCommand matches a command line of a document that runs a kvroute
// program, inline or in a shell block: go run ./path, go build's bin/name.
var docCommand = regexp.MustCompile(`(?:\bgo run (?:-v )?\./[A-Za-z0-9_/.-]+|\bbin/[a-z-]+)((?: +[^` + "`" + `\n|&;#)]+)*)`)

// docProseFlag matches a flag written in prose, --name, as the doc.go
// files of the commands give them.
var docProseFlag = regexp.MustCompile(`(?m)(?:^|[\s(,/])--([a-z][a-z0-9-]*)`)

// docFlagToken matches one word of a command line that is a flag.
var docFlagToken = regexp.MustCompile(`^(--?[a-z][a-z0-9-]*)(?:=.*)?$`)

// docFlags returns the flag names text gives: the code spans that start with
// a flag, the flags of its kvroute command lines and the --name words of its
// prose.
func docFlags(text string) []string {
	var out []string
	for _, m := range docProseFlag.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	for _, m := range docFlagSpan.FindAllStringSubmatch(text, -1) {
		out = append(out, strings.TrimLeft(m[1], "-"))
	}
	for _, m := range docCommand.FindAllStringSubmatch(text, -1) {
		for word := range strings.FieldsSeq(m[1]) {
			if fm := docFlagToken.FindStringSubmatch(strings.Trim(word, "[]")); fm != nil {
				out = append(out, strings.TrimLeft(fm[1], "-"))
			}
		}
	}
	return out
}

// TestDocFlags pins how flags are read from a document, so that a loosened
// pattern cannot pass TestREADMEFlagsExist vacuously.
func TestDocFlags(t *testing.T) {
	got := docFlags("pass `-listen`; `--grpc-port 9002`, `--secure-serving=false` and `--hold`\n" +
		"go run ./bench/cmd/routesim -pd -pd-seeds 4 -out bench/results\n" +
		"  bin/simengine --host 127.0.0.$i --port 800$i \\\n" +
		"`go run ./examples/demo --replicas 2 --fast`, in prose (--verbose), a-b--c")
	require.Equal(t, []string{"host", "port", "replicas", "fast", "verbose",
		"listen", "grpc-port", "secure-serving", "hold",
		"pd", "pd-seeds", "out", "host", "port", "replicas", "fast"}, got)
}

// TestREADMEFlagsExist holds every command-line flag the READMEs and the
// package docs give (a code span starting with one, the flags of a `go run
// ./...` or `bin/...` command line, a --name in prose) to the flags
// kvroute's programs define, the other programs' flags of
// otherProgramsFlags aside: a renamed or removed flag that a document still
// names fails with the document and the name.
func TestREADMEFlagsExist(t *testing.T) {
	defined := codeFlags(t)
	require.Greater(t, len(defined), 200, "the programs define flags")
	var bad []string
	mentions := 0
	for _, doc := range userDocs(t) {
		src, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, name := range docFlags(string(src)) {
			mentions++
			if !defined[name] && otherProgramsFlags[name] == "" {
				bad = append(bad, doc+": --"+name)
			}
		}
	}
	slices.Sort(bad)
	require.Greater(t, mentions, 150, "the READMEs name flags")
	require.Empty(t, slices.Compact(bad), "the READMEs must name the flags kvroute's programs define")
}
