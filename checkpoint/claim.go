package checkpoint

import (
	"errors"
	"fmt"
	"os"
)

// ErrPathInUse is wrapped by Restore's error when another router — another
// process, or another Keeper in this one — holds the checkpoint path
// (Config.Path). Two routers on one path would each restore the file the
// other last wrote, with endpoints and stream positions that are not
// theirs, and overwrite each other's checkpoints, so the second is refused
// at its start: give each router its own path.
var ErrPathInUse = errors.New("another router holds this checkpoint path; give each router its own")

// lockSuffix names the lock file beside a checkpoint: Path + lockSuffix.
const lockSuffix = ".lock"

// errLocked is lockFile's error when another open file holds the lock.
var errLocked = errors.New("locked")

// claimPath claims checkpoint path for the caller: it opens (creating it
// when missing) the lock file path + ".lock" and takes an exclusive
// advisory lock on it without waiting, which holds until the returned
// file is closed or the process ends, however it ends. The lock file is
// never removed: removing it would let a router that opened it just before
// lock a file no longer in the directory while a third locks a new one.
// Another holder is an error wrapping ErrPathInUse that names path.
func claimPath(path string) (*os.File, error) {
	lock := path + lockSuffix
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kvroute: checkpoint %s: opening its lock file: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("kvroute: checkpoint %s: %w (its lock file %s is held)", path, ErrPathInUse, lock)
		}
		return nil, fmt.Errorf("kvroute: checkpoint %s: locking %s: %w", path, lock, err)
	}
	return f, nil
}
