package checkpoint

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvroute/kvroute/kvindex"
)

// tempPattern names writeFileAtomic's temporary files beside the checkpoint
// file base (os.CreateTemp replaces the '*').
func tempPattern(base string) string { return base + ".tmp-*" }

// removeLeftoverTemps removes the temporary files a write to path left when
// its process died before the rename, each as large as the index was, and
// returns how many it removed. Only names writeFileAtomic makes for path
// are touched.
func removeLeftoverTemps(path string) (int, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	names, err := filepath.Glob(filepath.Join(dir, globEscape(base)+".tmp-*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// globEscape quotes filepath.Match's metacharacters in a literal name.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeFileAtomic writes ix's snapshot to a temporary file next to path,
// syncs it, renames it over path and syncs the directory, so that path
// always holds a complete snapshot (the old or the new one).
func writeFileAtomic(path string, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return kvindex.SnapshotInfo{}, err
	}
	tmp := f.Name()
	fail := func(err error) (kvindex.SnapshotInfo, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return kvindex.SnapshotInfo{}, err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	info, err := ix.WriteSnapshot(bw)
	if err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return kvindex.SnapshotInfo{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return kvindex.SnapshotInfo{}, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return info, err
	}
	defer d.Close()
	return info, d.Sync()
}
