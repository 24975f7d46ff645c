package checkpoint

import (
	"bufio"
	"os"
	"path/filepath"

	"github.com/kvroute/kvroute/kvindex"
)

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
