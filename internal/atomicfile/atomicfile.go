// Package atomicfile writes files so they hold either the complete new content or stay as
// they were: temp file in the same folder, fsync, rename, fsync of the folder. A crash or a
// full disk never leaves a half-written file under the final name.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Write makes path hold exactly data or stay as it was: it writes a temp file in
// the same folder, fsyncs it, renames it over path and fsyncs the folder. On any error the
// temp file is removed and path is untouched.
func Write(path string, data []byte) error {
	return Create(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Create is Write for content produced by fill, which writes into f (the temp file; fill
// must not close it). The file gets mode 0644, as os.WriteFile would under the usual umask
// (the temp file starts at 0600).
func Create(path string, fill func(f *os.File) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempMark+"*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err = fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return SyncDir(dir)
}

// tempMark is in the name of every temp file Create makes: "."+name+tempMark+digits.
const tempMark = ".tmp"

// isTemp reports whether name has the form of Create's temp files.
func isTemp(name string) bool {
	i := strings.LastIndex(name, tempMark)
	if !strings.HasPrefix(name, ".") || i < 1 || i+len(tempMark) == len(name) {
		return false
	}
	return strings.Trim(name[i+len(tempMark):], "0123456789") == ""
}

// RemoveTemps removes the temp files Create left in dir when its process was killed
// mid-write, and returns their names. Only for a folder no other process writes into
// at the same time (the caller holds its lock): a live Create's temp file would go too.
// A missing dir has none.
func RemoveTemps(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if e.Type().IsRegular() && isTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return removed, err
			}
			removed = append(removed, e.Name())
		}
	}
	return removed, nil
}

// SyncDir makes a rename or removal in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
