package store

import (
	"context"
	"sync"

	"needle/weights/wire"
)

// Step is the records that turn version From into version To, as complete wire frames
// (KindRecord) in chunk order: appended by one producer while any number of readers stream
// them, each at its own pace. Frames are immutable once appended.
type Step struct {
	From, To uint64
	ChunkMap *wire.ChunkMap // version To's

	mu       sync.Mutex
	more     chan struct{} // closed and replaced at every Append and at Finish
	frames   [][]byte
	bytes    int64
	done     bool
	err      error
	manifest []uint64
}

// NewStep starts an empty step; its producer Appends and then finishes it (Store.FinishStep).
func NewStep(from, to uint64, l *wire.ChunkMap) *Step {
	return &Step{From: from, To: to, ChunkMap: l, more: make(chan struct{})}
}

// Append adds the next frame.
func (s *Step) Append(frame []byte) {
	s.mu.Lock()
	s.frames = append(s.frames, frame)
	s.bytes += int64(len(frame))
	s.wake()
	s.mu.Unlock()
}

// Finish ends the step: complete with version To's manifest (nil if unknown), or failed
// with err, after which readers get err and plans skip the step.
func (s *Step) Finish(manifest []uint64, err error) {
	s.mu.Lock()
	s.done, s.err, s.manifest = true, err, manifest
	s.wake()
	s.mu.Unlock()
}

func (s *Step) wake() {
	close(s.more)
	s.more = make(chan struct{})
}

// Frame returns frame i, waiting for it to be appended. (nil, nil) means the step ended with
// i frames; a failed step returns its error.
func (s *Step) Frame(ctx context.Context, i int) ([]byte, error) {
	for {
		s.mu.Lock()
		switch {
		case s.err != nil:
			s.mu.Unlock()
			return nil, s.err
		case i < len(s.frames):
			f := s.frames[i]
			s.mu.Unlock()
			return f, nil
		case s.done:
			s.mu.Unlock()
			return nil, nil
		}
		more := s.more
		s.mu.Unlock()
		select {
		case <-more:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Progress reports the frames and bytes appended so far, whether the step is finished and
// how it failed.
func (s *Step) Progress() (frames int, bytes int64, done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.frames), s.bytes, s.done, s.err
}

// Manifest is version To's manifest once the step finished with one, else nil.
func (s *Step) Manifest() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.manifest
}

// failed reports whether the step finished with an error.
func (s *Step) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}
