//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f without waiting: errLocked when
// another open file description holds it (another process, or another open
// of the file in this one). The lock goes with f's close.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLocked
		default:
			return err
		}
	}
}
