package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dockerfile is what the tests read from kvroute-epp/Dockerfile.
type dockerfile struct {
	stages  []string          // FROM lines
	workdir string            // the build stage's last WORKDIR before its go build
	env     map[string]string // the go build line's environment assignments
	build   []string          // the go build command line, "go" first
	user    string            // the final stage's USER
	expose  []string          // the final stage's EXPOSE ports
}

// parseDockerfile reads the Dockerfile's instructions (continuation lines
// joined) and its RUN line that calls go build.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") && cur == "" {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += l
		if strings.TrimSpace(cur) != "" {
			lines = append(lines, strings.TrimSpace(cur))
		}
		cur = ""
	}
	d := dockerfile{env: map[string]string{}}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.stages = append(d.stages, rest)
			d.user, d.expose = "", nil
		case "WORKDIR":
			if d.build == nil {
				d.workdir = rest
			}
		case "USER":
			d.user = rest
		case "EXPOSE":
			d.expose = strings.Fields(rest)
		case "RUN":
			words := shellWords(t, rest)
			i := slices.Index(words, "go")
			if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
				continue
			}
			require.Nil(t, d.build, "more than one go build line")
			for _, w := range words[:i] {
				if strings.HasPrefix(w, "--mount=") {
					continue // BuildKit caches
				}
				k, v, ok := strings.Cut(w, "=")
				require.True(t, ok, "%s: %q before go build is not an assignment", path, w)
				d.env[k] = v
			}
			d.build = words[i:]
		}
	}
	return d
}

// shellWords splits a shell command line: blanks separate words, and double
// or single quotes group (and are removed) as the shell does.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	require.Zero(t, quote, "unterminated quote in %q", s)
	if in {
		words = append(words, w.String())
	}
	return words
}

func TestShellWords(t *testing.T) {
	require.Equal(t, []string{"A=1", "go", "build", "-ldflags=-s -w", "-o", "/out/x", ""},
		shellWords(t, `A=1 go  build -ldflags="-s -w" -o '/out/x' ""`))
}

// TestDockerfileBuildsAStaticNonRootBinary checks the image recipe (multi-
// stage, cgo off, a non-root user in the final stage, the picker's ports),
// runs its go build line with the same environment and flags in the same
// directory (the output moved to a temporary one), and checks that the
// binary is statically linked and knows every flag kvroute's manifests and
// the Helm chart pass it.
func TestDockerfileBuildsAStaticNonRootBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvroute-epp")
	}
	d := parseDockerfile(t, "kvroute-epp/Dockerfile")
	require.GreaterOrEqual(t, len(d.stages), 2, "a multi-stage build")
	require.Regexp(t, `(?i)\bAS build$`, d.stages[0])
	require.Equal(t, "0", d.env["CGO_ENABLED"], "a static binary needs CGO_ENABLED=0")
	require.NotEmpty(t, d.user, "the final stage sets USER")
	uid, _, _ := strings.Cut(d.user, ":")
	require.NotContains(t, []string{"0", "root"}, uid, "the final stage runs as root")
	require.Equal(t, []string{"9002", "9003", "9090"}, d.expose)

	// The build stage copies the repository to /src; run the line in the
	// same directory of this checkout.
	rel, ok := strings.CutPrefix(d.workdir, "/src")
	require.True(t, ok, "WORKDIR %s is not under /src", d.workdir)
	dir := filepath.Join("..", filepath.FromSlash(rel))
	args := slices.Clone(d.build[1:])
	i := slices.Index(args, "-o")
	require.True(t, i >= 0 && i+1 < len(args), "go build has no -o")
	bin := filepath.Join(t.TempDir(), "kvroute-epp")
	args[i+1] = bin
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range d.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s in %s:\n%s", strings.Join(args, " "), dir, out)

	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "the binary asks for a dynamic loader")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs, "the binary links shared libraries")

	known := binaryFlags(t, bin)
	for _, src := range manifestFlagSources(t) {
		for _, flag := range src.flags {
			require.True(t, known[flag], "%s passes --%s, which kvroute-epp does not know", src.name, flag)
		}
	}
}

var usageFlag = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)

// binaryFlags runs the binary with -h and returns the flags its usage lists.
func binaryFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, "-h").CombinedOutput() // -h exits non-zero after the usage
	flags := map[string]bool{}
	for _, m := range usageFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["pool-name"] && flags["grpc-port"], "usage of %s:\n%s", bin, out)
	return flags
}
