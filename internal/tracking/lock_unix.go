//go:build unix

package tracking

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on path for the life of the spool: two processes
// appending to one spool would interleave their records. The kernel releases flock when the
// process dies, so a crash never leaves a stale lock behind.
func lockDir(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
