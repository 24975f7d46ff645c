package checkpoint

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvroute/kvroute/kvindex"
)

// removeLeftoverTemps removes the temporary files a write to path left when
// its process died before the rename, each as large as the index was, and
// returns how many it removed. Only names writeFileAtomic makes for path
// (its base, ".tmp-", then os.CreateTemp's random part) are touched.
func removeLeftoverTemps(path string) (int, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), base+".tmp-") {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// writeFileAtomic writes ix's snapshot to a temporary file next to path,
// syncs it, renames it over path and syncs the directory, so that path
// always holds a complete snapshot (the old or the new one).
func writeFileAtomic(path string, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+".tmp-*")
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
