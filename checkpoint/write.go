package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
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

// errNotDurable is wrapped by writeFileAtomic's error when the new
// checkpoint was renamed over path but the directory could not be synced
// after: path holds the new checkpoint, whole, but a crash before the file
// system writes the directory back may bring the previous one back.
var errNotDurable = errors.New("the new checkpoint is in place, but the directory sync after its rename failed: a crash may bring back the previous checkpoint")

// syncDir syncs directory dir, which makes a rename in it durable. It is a
// variable so that a test can make it fail: a directory's fsync fails only
// on a failing disk or file system, which a test cannot bring about.
var syncDir = defaultSyncDir

// defaultSyncDir opens dir and syncs it.
func defaultSyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeFileAtomic writes ix's snapshot to a temporary file next to path,
// syncs it, renames it over path and syncs the directory, so that path
// always holds a complete snapshot (the old or the new one). An error
// before the rename leaves the previous checkpoint in place; one after it
// (the directory sync) wraps errNotDurable, with the new checkpoint's info.
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
	if err := syncDir(dir); err != nil {
		return info, fmt.Errorf("kvroute: checkpoint %s: %w: %w", path, errNotDurable, err)
	}
	return info, nil
}
