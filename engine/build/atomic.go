package build

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic makes path hold exactly data or stay as it was: it writes a temp file in
// the same folder, fsyncs it, renames it over path and fsyncs the folder. On any error the
// temp file is removed and path is untouched.
func writeFileAtomic(path string, data []byte) error {
	return createAtomic(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// createAtomic is writeFileAtomic for content produced by fill, which writes into f.
func createAtomic(path string, fill func(f *os.File) error) (err error) {
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
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
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
