package kvroute

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxTrackedFile bounds a file the repository tracks: the largest are the
// committed simulation results, a few hundred KiB.
const maxTrackedFile = 4 << 20

// TestNoBuildOutputTracked keeps built binaries and other large outputs out
// of the repository: no file git tracks may be an executable (ELF) nor
// larger than maxTrackedFile. A 100 MB kvroute-epp binary built in the
// wrong folder was once committed; .gitignore lists the binaries' usual
// places, and this catches the others. It needs a git checkout and skips
// without one.
func TestNoBuildOutputTracked(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v)", err)
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err)
	top := strings.TrimSpace(string(root))
	var bad []string
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		p := filepath.Join(top, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		if fi.Size() > maxTrackedFile {
			bad = append(bad, name+": larger than 4 MiB")
			continue
		}
		f, err := os.Open(p)
		require.NoError(t, err)
		head := make([]byte, 4)
		n, _ := io.ReadFull(f, head)
		f.Close()
		if bytes.Equal(head[:n], []byte("\x7fELF")) {
			bad = append(bad, name+": an executable")
		}
	}
	require.Empty(t, bad, "build outputs tracked by git; remove them (git rm --cached) and list them in .gitignore")
}
