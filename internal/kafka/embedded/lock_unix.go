//go:build unix

package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockName sits beside kfake's files; kfake ignores names it does not know.
const lockName = "embedded.lock"

// lockDir takes an exclusive advisory lock on dir for the life of the broker. flock is
// released by the kernel when the process dies, so a crashed `partnerstream dev` never
// leaves a stale lock behind.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", errLocked, err)
	}
	return func() { f.Close() }, nil
}
