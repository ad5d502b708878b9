package receiver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"needle/internal/atomicfile"
	"needle/weights/wire"
)

// files are the receiver's paths. Out is what readers and the engine see; everything else
// lives in a hidden folder beside it, so that an engine that loads every *.safetensors file
// of Out's folder sees Out alone.
type files struct {
	out   string // the weights file, always a complete version (replaced by rename)
	dir   string // Out's folder
	state string // state.json
	next  string // the version being built
	spare string // a copy of Out, the starting point of the next delta step
	lock  string // flock'd while a receiver owns the folder
}

func newFiles(out string) files {
	dir := filepath.Dir(out)
	own := filepath.Join(dir, "."+filepath.Base(out)+".needle")
	return files{out: out, dir: dir, state: filepath.Join(own, "state.json"), next: filepath.Join(own, "next"),
		spare: filepath.Join(own, "spare"), lock: filepath.Join(own, "lock")}
}

// state is what a restarted receiver needs to know, written atomically at each change.
type state struct {
	Run      string `json:"run,omitempty"`
	Version  uint64 `json:"version,omitempty"`  // Out's version (a claim until verified against a manifest)
	Notified uint64 `json:"notified,omitempty"` // the last version the engine took
	Spare    uint64 `json:"spare,omitempty"`    // the version spare holds; 0: no usable spare
	// Full is a full step being written into next: a restart resumes it at Record.
	Full *wire.Resume `json:"full,omitempty"`
	// Committing: next holds Version complete and is being renamed over Out; a restart
	// finishes the rename.
	Committing bool `json:"committing,omitempty"`
}

func (f files) load() (state, error) {
	var st state
	b, err := os.ReadFile(f.state)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return st, fmt.Errorf("%s: %w", f.state, err)
	}
	return st, nil
}

func (f files) save(st state) error {
	b, _ := json.Marshal(st)
	return atomicfile.Write(f.state, b)
}

// lockDir creates the hidden folder and takes its lock: two receivers on one file would
// overwrite each other's versions.
func (f files) lockDir() (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(f.lock), 0o755); err != nil {
		return nil, err
	}
	l, err := os.OpenFile(f.lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(l.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s is used by another receiver (%v)", f.out, err)
	}
	return l, nil
}

// recover brings the folder to a consistent state after a crash: it finishes an interrupted
// commit, keeps a full step's partial file for resuming, and removes what cannot be used (a
// partial delta step: its records were applied in place to a copy of the base).
func (f files) recover(st *state) error {
	_, nextErr := os.Stat(f.next)
	hasNext := nextErr == nil
	switch {
	case st.Committing && hasNext:
		if err := os.Rename(f.next, f.out); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(f.dir); err != nil {
			return err
		}
	case st.Full != nil && hasNext:
		return f.save(*st) // resumable
	case hasNext:
		if err := os.Remove(f.next); err != nil {
			return err
		}
	}
	st.Committing, st.Full = false, nil
	if _, err := os.Stat(f.spare); err != nil {
		st.Spare = 0
	}
	if _, err := atomicfile.RemoveTemps(filepath.Dir(f.spare)); err != nil {
		return err
	}
	return f.save(*st)
}
