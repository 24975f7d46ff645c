package outdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModuleRootIsTheRootModule(t *testing.T) {
	root, err := ModuleRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(data), "module github.com/kvroute/kvroute\n"))
}

// The default output directory is under out/, which .gitignore ignores.
func TestDefaultOutputIsIgnored(t *testing.T) {
	dir, err := Resolve("", "out/gwload")
	require.NoError(t, err)
	root, err := ModuleRoot()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "out", "gwload"), dir)
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(ignore), "\n"), "/out/")
}

func TestOutsideTheModule(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := ModuleRoot()
	require.ErrorContains(t, err, "not inside the kvroute module")
	_, err = Resolve("", "out/x")
	require.ErrorContains(t, err, "pass -out")
	dir, err := Resolve("given", "out/x")
	require.NoError(t, err)
	require.Equal(t, "given", dir)
}
