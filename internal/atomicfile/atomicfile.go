// Package atomicfile writes files so they hold either the complete new content or stay as
// they were: temp file in the same folder, fsync, rename, fsync of the folder. A crash or a
// full disk never leaves a half-written file under the final name.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
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
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
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
