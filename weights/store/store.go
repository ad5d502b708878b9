package store

import (
	"context"
	"slices"
	"sync"

	"needle/weights/wire"
)

// Store is a node's snapshots and retained steps, all of one run. Safe for concurrent use.
type Store struct {
	keep    int // steps retained, newest first
	threads int // goroutines that hash a snapshot for a manifest request

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever what can be served changes
	run     string
	snaps   []*Snapshot // live snapshots, in publish order
	steps   []*Step     // retained steps, in the order added
	// known are the manifests of retired snapshots (the newest keep+2): a receiver that
	// restarts holding a version whose half the sender has since overwritten can still check
	// its file against it, and then take the delta chain from it.
	known []wire.Manifest
}

// New returns an empty store that retains the keep newest steps and hashes snapshots with
// threads goroutines when a manifest is asked for.
func New(keep, threads int) *Store {
	return &Store{keep: max(keep, 1), threads: max(threads, 1), changed: make(chan struct{})}
}

// Run is the run whose versions the store holds ("" before the first).
func (s *Store) Run() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// SetRun makes run the store's run. Another run's steps are dropped and its snapshots
// retired (readers of those finish: a receiver's old file stays valid while mapped).
func (s *Store) SetRun(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if run == s.run {
		return
	}
	s.run = run
	for _, snap := range s.snaps {
		snap.retire(false)
	}
	s.snaps, s.steps, s.known = nil, nil, nil
	s.wake()
}

func (s *Store) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// AddSnapshot makes snap (of the store's run) servable; the newest snapshot is what full
// transfers send.
func (s *Store) AddSnapshot(snap *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps = append(s.snaps, snap)
	s.wake()
}

// Retire stops serving snap and returns a channel closed once no reader holds it. With abort,
// readers are told to stop at once (Gone): the sender overwrites the memory next.
func (s *Store) Retire(snap *Snapshot, abort bool) <-chan struct{} {
	s.mu.Lock()
	s.snaps = slices.DeleteFunc(s.snaps, func(x *Snapshot) bool { return x == snap })
	if m := snap.KnownManifest(); m != nil && snap.Run == s.run {
		s.known = append(s.known, manifestOf(snap.Run, snap.Version, snap.ChunkMap, m))
		if len(s.known) > s.keep+2 {
			s.known = s.known[len(s.known)-s.keep-2:]
		}
	}
	s.wake()
	s.mu.Unlock()
	return snap.retire(abort)
}

// AddStep makes step servable (while it is still being produced, too) and drops the oldest
// steps beyond the store's keep; a reader of a dropped step finishes it.
func (s *Store) AddStep(step *Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, step)
	if len(s.steps) > s.keep {
		s.steps = s.steps[len(s.steps)-s.keep:]
	}
	s.wake()
}

// FinishStep finishes step (Step.Finish) and lets waiting plans look again: a failed step
// no longer bridges its versions.
func (s *Store) FinishStep(step *Step, manifest []uint64, err error) {
	step.Finish(manifest, err)
	s.mu.Lock()
	s.wake()
	s.mu.Unlock()
}

// Steps returns the retained steps, oldest first.
func (s *Store) Steps() []*Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.steps)
}

// Transfer is a planned transfer: the Plan to send and what its steps are read from.
type Transfer struct {
	Plan  wire.Plan
	First int       // records of the plan's first step the client already holds
	Full  *Snapshot // the first step's version when that step is full (acquired: Release)
	Steps []*Step   // the delta steps, in order, after Full if there is one
}

// Release drops the transfer's reference to its snapshot.
func (t *Transfer) Release() {
	if t.Full != nil {
		t.Full.Release()
	}
}

// Plan returns what to send the client of hello: continue its interrupted step if the store
// still has it, else the delta steps from its version to the newest the store can reach, or
// the newest snapshot in full (first pull, another run, a gap the retained steps do not
// bridge, deltas larger than half the file, or hello.Full), followed by any steps beyond it.
// With nothing newer than the client's version, hello.Wait holds the answer until there is
// (or ctx ends); without it the plan has no steps.
func (s *Store) Plan(ctx context.Context, hello wire.Hello) (*Transfer, error) {
	for {
		s.mu.Lock()
		t := s.plan(hello)
		changed := s.changed
		s.mu.Unlock()
		if len(t.Plan.Steps) > 0 || !hello.Wait {
			return t, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// plan is Plan's decision, under mu.
func (s *Store) plan(h wire.Hello) *Transfer {
	have := h.Have
	if h.Run != s.run {
		have = 0
	}
	if r := h.Resume; r != nil && r.Run == s.run {
		if t := s.resume(*r); t != nil {
			return t
		}
	}
	full := s.newest()
	if !h.Full {
		if chain := s.chain(have, full); len(chain) > 0 {
			return s.transfer(nil, chain, 0)
		}
	}
	if full != nil && full.Version > have && full.Acquire() {
		return s.transfer(full, s.chain(full.Version, nil), 0)
	}
	return &Transfer{Plan: wire.Plan{Run: s.run, Target: have}}
}

// resume continues step r if the store has it.
func (s *Store) resume(r wire.Resume) *Transfer {
	if r.From == 0 {
		for _, snap := range s.snaps {
			if snap.Version == r.To && snap.Acquire() {
				t := s.transfer(snap, s.chain(r.To, nil), r.Record)
				t.Plan.Resumed = true
				return t
			}
		}
		return nil
	}
	for _, st := range s.steps {
		if st.From == r.From && st.To == r.To && !st.failed() {
			t := s.transfer(nil, append([]*Step{st}, s.chain(st.To, nil)...), r.Record)
			t.Plan.Resumed = true
			return t
		}
	}
	return nil
}

// chain follows retained steps from version have. It returns nil when have is 0, when full
// is newer than where the steps lead, or when several steps add up to half of full's file
// (one delta step is always cheaper than the file: records fall back to raw chunks).
func (s *Store) chain(have uint64, full *Snapshot) []*Step {
	if have == 0 {
		return nil
	}
	var chain []*Step
	var bytes int64
	for cur := have; ; {
		i := slices.IndexFunc(s.steps, func(st *Step) bool { return st.From == cur && !st.failed() })
		if i < 0 {
			break
		}
		chain = append(chain, s.steps[i])
		_, b, _, _ := s.steps[i].Progress()
		bytes += b
		cur = s.steps[i].To
	}
	if len(chain) == 0 || full != nil && (full.Version > chain[len(chain)-1].To || len(chain) > 1 && 2*bytes > full.ChunkMap.Size) {
		return nil
	}
	return chain
}

func (s *Store) transfer(full *Snapshot, steps []*Step, first int) *Transfer {
	t := &Transfer{Full: full, Steps: steps, First: first, Plan: wire.Plan{Run: s.run}}
	if full != nil {
		t.Plan.Steps = append(t.Plan.Steps, wire.StepInfo{To: full.Version})
		t.Plan.Target = full.Version
	}
	for _, st := range steps {
		t.Plan.Steps = append(t.Plan.Steps, wire.StepInfo{From: st.From, To: st.To})
		t.Plan.Target = st.To
	}
	return t
}

// newest is the newest live snapshot, or nil.
func (s *Store) newest() *Snapshot {
	var n *Snapshot
	for _, snap := range s.snaps {
		if n == nil || snap.Version > n.Version {
			n = snap
		}
	}
	return n
}

// Manifest returns version's manifest if the store knows it: from a live snapshot (hashed
// now if it never was) or from a finished step that led to it.
func (s *Store) Manifest(run string, version uint64) (wire.Manifest, bool) {
	s.mu.Lock()
	var snap *Snapshot
	for _, x := range s.snaps {
		if run == s.run && x.Version == version && x.Whole() && x.Acquire() {
			snap = x
			break
		}
	}
	var steps []*Step
	var known []wire.Manifest
	if run == s.run {
		steps, known = slices.Clone(s.steps), slices.Clone(s.known)
	}
	s.mu.Unlock()
	if snap != nil {
		defer snap.Release()
		return manifestOf(run, version, snap.ChunkMap, snap.Manifest(s.threads)), true
	}
	for _, st := range steps {
		if m := st.Manifest(); st.To == version && m != nil {
			return manifestOf(run, version, st.ChunkMap, m), true
		}
	}
	for _, m := range known {
		if m.Version == version {
			return m, true
		}
	}
	return wire.Manifest{}, false
}

func manifestOf(run string, version uint64, l *wire.ChunkMap, hashes []uint64) wire.Manifest {
	return wire.Manifest{Run: run, Version: version, Size: l.Size, Chunk: l.Chunk, Header: l.Header, Hashes: hashes}
}
