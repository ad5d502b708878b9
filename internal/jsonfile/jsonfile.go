// Package jsonfile reads and writes the JSON files that describe a finished folder (`needle
// build`'s manifest.json, `needle convert`'s compact.json): written atomically
// (internal/atomicfile) and checked on the way out and back in, so a folder is never described
// by a half-written or invalid file.
package jsonfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"needle/internal/atomicfile"
)

// Read fills v from the JSON file at path and checks it with validate; errors name the path.
// A missing file is the os.ReadFile error (errors.Is os.ErrNotExist).
func Read(path string, v any, validate func() error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Write checks v with validate and writes it to path, indented, atomically.
func Write(path string, v any, validate func() error) error {
	if err := validate(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// LocalName reports whether name is a plain file name (no folder part), so a description
// can never point outside its folder.
func LocalName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// LocalPath is the path a description of folder dir records for path (relative to the working
// directory, or absolute): a file inside the folder by its path relative to the folder, so that
// the folder can be moved or copied (to another machine) with its files; a file outside it by
// its absolute path, which does not travel.
func LocalPath(dir, path string) string {
	if path == "" {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if absDir, err := filepath.Abs(dir); err == nil {
		if rel, err := filepath.Rel(absDir, abs); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	return abs
}

// ResolvePath is the file that path p, recorded by a description of folder dir, names (as an
// absolute path). Descriptions written before LocalPath hold absolute paths, read as they are.
func ResolvePath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if abs, err := filepath.Abs(filepath.Join(dir, p)); err == nil {
		return abs
	}
	return filepath.Join(dir, p)
}
