package indexdir

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// LockDir takes an exclusive lock on dir so two builds (or conversions) never write one folder.
func LockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: another needle build or convert is writing this folder (%v)", dir, err)
	}
	return func() { f.Close() }, nil
}
