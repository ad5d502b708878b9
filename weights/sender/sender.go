// Package sender is the trainer-side daemon of weight transfer. It owns a double buffer in
// shared memory: two safetensors files (halves) in its folder, one holding the newest
// published version and one the version before it. A publisher (the trainer, through the
// control socket: control.go) writes a new version into the older half and commits it; the
// sender acks at once and, in the background, encodes the delta from the previous version
// (wire.EncodeStep) while its records already stream to receivers.
// Both halves and the retained delta steps live in a store.Store that package server serves.
//
// Before a half is overwritten, its readers are stopped: the job that reads it as the old
// version is waited for (it is bounded by one pass over the halves), and receivers still
// pulling it in full are disconnected (they ask again and get the newest version).
package sender

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"needle/internal/atomicfile"
	"needle/internal/idle"
	"needle/internal/mapfile"
	"needle/internal/prom"
	"needle/safetensors"
	"needle/weights/store"
	"needle/weights/wire"
)

// Options configures a Sender.
type Options struct {
	Dir     string      // the shared-memory folder (halves, state, control socket)
	Format  wire.Format // of delta records
	Chunk   int64       // bytes of a record's chunk
	Keep    int         // delta steps retained for receivers several versions behind
	Threads int         // goroutines of an encode job
	NewRun  bool        // forget the folder's versions and start a new run
	Metrics *prom.Registry
	Log     *log.Logger // nil: discarded
}

// Sender is the daemon's state. Its methods are safe for concurrent use.
type Sender struct {
	opt   Options
	Store *store.Store
	lock  *os.File
	m     counters

	mu    sync.Mutex
	st    savedState
	snaps [2]*store.Snapshot // the committed version of each half, nil when empty
	open  int                // the half a publish is writing, -1 when none
	// preparing is closed when a background reservation of that half's pages ends (prepare).
	preparing [2]chan struct{}
	jobs      map[uint64]chan struct{} // background jobs of recent versions, closed when done
	stats     map[uint64]JobStats      // what they did
	recent    []uint64                 // the versions in jobs, oldest first (a bounded history)
}

// history is how many versions' jobs Wait and Status remember.
const history = 16

// savedState is sender.json: what a restarted sender needs to serve its halves again.
type savedState struct {
	Run    string    `json:"run"`
	Halves [2]uint64 `json:"halves"` // committed version of each half, 0 when empty or being written
	Newest uint64    `json:"newest"`
	Prev   uint64    `json:"prev"` // the version published before Newest (its delta base)
}

// JobStats is what the background job of a version did.
type JobStats struct {
	wire.StepStats
	Version uint64 `json:"version"`
	Base    uint64 `json:"base"` // 0: no delta (the first version, or after a restart without a base)
	Err     string `json:"error,omitempty"`
}

func (s *Sender) half(i int) string {
	return filepath.Join(s.opt.Dir, fmt.Sprintf("half%d.safetensors", i))
}
func (s *Sender) statePath() string   { return filepath.Join(s.opt.Dir, "sender.json") }
func (s *Sender) ControlPath() string { return filepath.Join(s.opt.Dir, "control.sock") }

// Open takes the folder (creating it), and serves again the versions its halves hold.
func Open(opt Options) (*Sender, error) {
	if opt.Chunk == 0 {
		opt.Chunk = wire.DefaultChunk
	}
	opt.Threads = max(opt.Threads, 1)
	if opt.Metrics == nil {
		opt.Metrics = prom.NewRegistry()
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(opt.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%s is used by another sender (%v)", opt.Dir, err)
	}
	s := &Sender{opt: opt, Store: store.New(opt.Keep, opt.Threads), lock: lock, open: -1,
		jobs: map[uint64]chan struct{}{}, stats: map[uint64]JobStats{}, m: newCounters(opt.Metrics)}
	if err := s.recover(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sender) logf(format string, args ...any) {
	if s.opt.Log != nil {
		s.opt.Log.Printf(format, args...)
	}
}

// recover loads sender.json and maps the committed halves; when they hold a version and the
// one before it, the delta between them is encoded again (the retained steps were in memory).
func (s *Sender) recover() error {
	b, err := os.ReadFile(s.statePath())
	switch {
	case errors.Is(err, os.ErrNotExist) || s.opt.NewRun:
		s.st = savedState{Run: newRunID()}
		s.Store.SetRun(s.st.Run)
		return s.save()
	case err != nil:
		return err
	}
	if err := json.Unmarshal(b, &s.st); err != nil {
		return fmt.Errorf("%s: %w", s.statePath(), err)
	}
	s.Store.SetRun(s.st.Run)
	var newest, prev *store.Snapshot
	for i, v := range s.st.Halves {
		if v == 0 {
			continue
		}
		snap, err := s.mapHalf(i, v)
		if err != nil {
			s.logf("needle weights send: dropping half %d (version %d): %v", i, v, err)
			s.st.Halves[i] = 0
			continue
		}
		s.snaps[i] = snap
		s.Store.AddSnapshot(snap)
		switch v {
		case s.st.Newest:
			newest = snap
		case s.st.Prev:
			prev = snap
		}
	}
	if newest == nil {
		s.st.Newest, s.st.Prev = 0, 0
		return s.save()
	}
	s.logf("needle weights send: run %s, serving version %d again (half files kept in %s)", s.st.Run, newest.Version, s.opt.Dir)
	s.startJob(prev, newest)
	return s.save()
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Sender) save() error {
	b, _ := json.Marshal(s.st)
	return atomicfile.Write(s.statePath(), b)
}

// mapHalf maps half i, which holds version v, as a snapshot.
func (s *Sender) mapHalf(i int, v uint64) (*store.Snapshot, error) {
	// Not populated: filling the page tables of a whole version up front would delay the
	// commit; the encode job's reads fault them in 16 pages at a time (fault-around).
	f, data, release, err := mapfile.MapOpen(s.half(i), false)
	if err != nil {
		return nil, err
	}
	l, err := wire.ChunkMapOf(data, s.opt.Chunk)
	if err != nil {
		release()
		return nil, fmt.Errorf("%s: %w", s.half(i), err)
	}
	snap := store.NewSnapshot(s.st.Run, v, l, data, release)
	snap.File = f
	return snap, nil
}

// Tensor is one tensor of a version to publish.
type Tensor struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// Slot is where a publisher writes a version: the half file and each tensor's byte range.
type Slot struct {
	Version uint64     `json:"version"`
	Path    string     `json:"path"`
	Size    int64      `json:"size"`
	Offsets [][2]int64 `json:"offsets"` // per tensor, [begin, end) as file offsets
	half    int
}

// Begin reserves the older half for version (0: the newest + 1) laid out with tensors and
// metadata, and writes its header. It waits for the half's readers to stop; the publisher
// then writes each tensor's bytes at Offsets and calls Commit, or Abort.
func (s *Sender) Begin(version uint64, tensors []Tensor, metadata map[string]string) (*Slot, error) {
	st := make([]safetensors.Tensor, len(tensors))
	for i, t := range tensors {
		st[i] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	header, laid, err := safetensors.EncodeHeader(st, metadata)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.open >= 0 {
		s.mu.Unlock()
		return nil, errors.New("another publish is in progress (one publisher at a time)")
	}
	if version == 0 {
		version = s.st.Newest + 1
	}
	if version <= s.st.Newest {
		s.mu.Unlock()
		return nil, fmt.Errorf("version %d is not newer than the published %d (versions increase within a run; a new run starts them again)", version, s.st.Newest)
	}
	h := 0
	if s.st.Halves[0] == s.st.Newest && s.st.Newest != 0 {
		h = 1
	}
	old, preparing := s.snaps[h], s.preparing[h]
	s.snaps[h], s.st.Halves[h], s.open = nil, 0, h
	err = s.save()
	s.mu.Unlock()
	if preparing != nil {
		<-preparing
	}
	if err == nil && old != nil {
		<-s.Store.Retire(old, true) // the job reading it as its base, and full pulls of it, end first
	}
	size := int64(len(header))
	if len(laid) > 0 {
		size += laid[len(laid)-1].End
	}
	if err == nil {
		err = writeHeader(s.half(h), header, size)
	}
	if err != nil {
		s.Abort()
		return nil, err
	}
	slot := &Slot{Version: version, Path: s.half(h), Size: size, half: h}
	for _, t := range laid {
		slot.Offsets = append(slot.Offsets, [2]int64{int64(len(header)) + t.Begin, int64(len(header)) + t.End})
	}
	return slot, nil
}

// writeHeader sizes the half file (reserving its space) and writes the header at its start.
func writeHeader(path string, header []byte, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := mapfile.Reserve(f, size); err != nil {
		return err
	}
	_, err = f.WriteAt(header, 0)
	return err
}

// Abort gives up the open publish: its half stays empty.
func (s *Sender) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = -1
}

// Commit publishes the version written into slot: it is served in full at once, and its
// delta from the newest version is encoded in the background.
func (s *Sender) Commit(slot *Slot) error {
	s.mu.Lock()
	if s.open != slot.half {
		s.mu.Unlock()
		return errors.New("commit without a begin")
	}
	s.mu.Unlock()
	snap, err := s.mapHalf(slot.half, slot.Version)
	if err != nil {
		s.Abort()
		return err
	}
	s.mu.Lock()
	prev := s.snaps[1-slot.half]
	s.snaps[slot.half], s.st.Halves[slot.half], s.open = snap, slot.Version, -1
	s.st.Prev, s.st.Newest = s.st.Newest, slot.Version
	err = s.save()
	s.mu.Unlock()
	// The step first: a receiver at prev that wakes on the snapshot must find the step
	// (still being encoded) and not plan the whole version.
	s.startJob(prev, snap)
	s.Store.AddSnapshot(snap)
	s.m.version.Set(float64(slot.Version))
	if prev == nil {
		s.prepare(1-slot.half, slot.Size)
	}
	return err
}

// prepare reserves half h's pages for a version of about size bytes in the background, at
// idle priority, when the half has none (it never held a version): the next publish then
// writes into pages that exist, instead of taking each fresh page from the kernel (and, on a
// VM, from the host) inside the trainer's publish call. Begin waits for it.
func (s *Sender) prepare(h int, size int64) {
	if st, err := os.Stat(s.half(h)); err == nil && st.Size() >= size {
		return
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.preparing[h] = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		err := idle.Run(func() error {
			f, err := os.OpenFile(s.half(h), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			return mapfile.Reserve(f, size)
		})
		if err != nil {
			s.logf("needle weights send: reserving half %d ahead: %v (the next publish reserves it)", h, err)
		}
	}()
}

// startJob encodes prev -> cur in the background, then hashes cur for its manifest (prev
// nil: the manifest only).
func (s *Sender) startJob(prev, cur *store.Snapshot) {
	var step *store.Step
	if prev != nil && prev.Acquire() {
		step = store.NewStep(prev.Version, cur.Version, cur.ChunkMap)
		s.Store.AddStep(step)
	} else {
		prev = nil
	}
	cur.Acquire()
	done := make(chan struct{})
	s.mu.Lock()
	s.jobs[cur.Version] = done
	s.recent = append(s.recent, cur.Version)
	if len(s.recent) > history {
		delete(s.jobs, s.recent[0])
		delete(s.stats, s.recent[0])
		s.recent = s.recent[1:]
	}
	s.mu.Unlock()
	go func() {
		defer close(done)
		defer cur.Release()
		js := JobStats{Version: cur.Version}
		var err error
		if prev != nil {
			js.StepStats, err = wire.EncodeStep(prev.Image, cur.Image, s.opt.Format, s.opt.Threads, nil, func(frame []byte) error {
				step.Append(frame)
				return nil
			})
			prev.Release()
			js.Base = prev.Version
			s.Store.FinishStep(step, nil, err)
		}
		// The manifest after the step, on one thread at idle priority: receivers wait for
		// the step's records (or a full version's bytes), not for this hash, and it must not
		// slow them where they share the host; a full step's End carries it once it is done,
		// and a receiver that restarts checks its file against it.
		idle.Run(func() error {
			cur.Manifest(1)
			return nil
		})
		if err != nil {
			js.Err = err.Error()
			s.logf("needle weights send: encoding version %d: %v (receivers get it in full)", cur.Version, err)
		}
		s.m.record(js)
		s.mu.Lock()
		if _, ok := s.jobs[cur.Version]; ok {
			s.stats[cur.Version] = js
		}
		s.mu.Unlock()
	}()
}

// Wait blocks until version's background job has finished and returns what it did.
func (s *Sender) Wait(version uint64) (JobStats, error) {
	s.mu.Lock()
	done, ok := s.jobs[version]
	s.mu.Unlock()
	if !ok {
		return JobStats{}, fmt.Errorf("version %d is not among the %d versions this sender published last", version, history)
	}
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats[version], nil
}

// Status is the sender's state for GET /status.
type Status struct {
	Dir    string     `json:"dir"`
	Run    string     `json:"run"`
	Newest uint64     `json:"newest"`
	Halves [2]uint64  `json:"halves"`
	Steps  [][2]int64 `json:"steps"` // retained steps: [from, to]
	Last   *JobStats  `json:"last_job,omitempty"`
}

// Status reports the sender's versions and its last finished job.
func (s *Sender) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Dir: s.opt.Dir, Run: s.st.Run, Newest: s.st.Newest, Halves: s.st.Halves}
	if js, ok := s.stats[s.st.Newest]; ok {
		st.Last = &js
	}
	for _, step := range s.Store.Steps() {
		st.Steps = append(st.Steps, [2]int64{int64(step.From), int64(step.To)})
	}
	return st
}

// Close waits for running jobs, stops serving the halves and unmaps them (once their readers
// have stopped), and releases the folder (the halves stay for a restart).
func (s *Sender) Close() {
	s.mu.Lock()
	jobs := make([]chan struct{}, 0, len(s.jobs))
	for _, d := range s.jobs {
		jobs = append(jobs, d)
	}
	snaps := s.snaps
	s.snaps = [2]*store.Snapshot{}
	s.mu.Unlock()
	for _, d := range jobs {
		<-d
	}
	for _, snap := range snaps {
		if snap != nil {
			<-s.Store.Retire(snap, true)
		}
	}
	s.lock.Close()
}

// counters are the sender's metrics.
type counters struct {
	version, seconds, changed, elements, wire, astra *prom.Value
	reg                                              *prom.Registry
}

func newCounters(reg *prom.Registry) counters {
	return counters{
		version:  reg.Gauge("needle_weights_version", "newest published version"),
		seconds:  reg.Gauge("needle_weights_encode_seconds", "wall time of the last encode job"),
		changed:  reg.Gauge("needle_weights_changed_elements", "elements changed in the last version (of those compared as deltas)"),
		elements: reg.Gauge("needle_weights_compared_elements", "elements compared as deltas in the last version"),
		wire:     reg.Gauge("needle_weights_delta_bytes", "bytes of the last version's delta step on the wire"),
		astra:    reg.Gauge("needle_weights_astraflow_bytes", "bytes AstraFlow's format needs for the same changes"),
		reg:      reg,
	}
}

func (c counters) record(js JobStats) {
	c.seconds.Set(js.Seconds)
	c.changed.Set(float64(js.Changed))
	c.elements.Set(float64(js.Elements))
	c.wire.Set(float64(js.WireBytes))
	c.astra.Set(float64(js.AstraFlowBytes))
	result := "ok"
	if js.Err != "" {
		result = "failed"
	}
	c.reg.Counter("needle_weights_encode_jobs_total", "background encode jobs, by result", "result", result).Add(1)
}
