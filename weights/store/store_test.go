package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"needle/bench/synth"
	"needle/weights/wire"
)

// testChunkMap is a 4 KiB file in 1 KiB chunks.
func testChunkMap(t *testing.T) (*wire.ChunkMap, []byte) {
	img, hdr := synth.Image([]synth.Tensor{synth.T("w", "BF16", 2048)}, 1)
	l, err := wire.NewChunkMap(img[:hdr], int64(len(img)), 1024)
	if err != nil {
		t.Fatal(err)
	}
	return l, img
}

func snapshot(l *wire.ChunkMap, img []byte, v uint64) *Snapshot {
	return NewSnapshot("run", v, l, img, nil)
}

// step returns a finished step from -> to of frames frames of size bytes each.
func step(s *Store, l *wire.ChunkMap, from, to uint64, frames, size int) *Step {
	st := NewStep(from, to, l)
	for range frames {
		st.Append(make([]byte, size))
	}
	s.AddStep(st)
	s.FinishStep(st, []uint64{to}, nil)
	return st
}

func plan(t *testing.T, s *Store, h wire.Hello) *Transfer {
	t.Helper()
	tr, err := s.Plan(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Release)
	return tr
}

func steps(tr *Transfer) []wire.StepInfo { return tr.Plan.Steps }

func TestPlanChoices(t *testing.T) {
	l, img := testChunkMap(t)
	s := New(8, 1)
	s.SetRun("run")
	if tr := plan(t, s, wire.Hello{}); len(steps(tr)) != 0 {
		t.Fatalf("empty store planned %v", steps(tr))
	}
	s.AddSnapshot(snapshot(l, img, 1))
	step(s, l, 1, 2, 1, 100)
	step(s, l, 2, 3, 1, 100)
	v3 := snapshot(l, img, 3)
	s.AddSnapshot(v3)
	for _, c := range []struct {
		name  string
		hello wire.Hello
		want  []wire.StepInfo
	}{
		{"first pull: full newest", wire.Hello{}, []wire.StepInfo{{To: 3}}},
		{"one behind: delta", wire.Hello{Run: "run", Have: 2}, []wire.StepInfo{{From: 2, To: 3}}},
		{"two behind, small deltas: chain", wire.Hello{Run: "run", Have: 1}, []wire.StepInfo{{From: 1, To: 2}, {From: 2, To: 3}}},
		{"resync asked: full", wire.Hello{Run: "run", Have: 2, Full: true}, []wire.StepInfo{{To: 3}}},
		{"ahead of this node: nothing yet", wire.Hello{Run: "run", Have: 7}, nil},
		{"another run: full", wire.Hello{Run: "old", Have: 2}, []wire.StepInfo{{To: 3}}},
		{"up to date", wire.Hello{Run: "run", Have: 3}, nil},
	} {
		tr := plan(t, s, c.hello)
		if got := steps(tr); !slices.Equal(got, c.want) {
			t.Errorf("%s: plan %v, want %v", c.name, got, c.want)
		}
	}
	// Two steps that add up to more than half the file: the full file is cheaper.
	s2 := New(8, 1)
	s2.SetRun("run")
	step(s2, l, 1, 2, 3, 1000)
	step(s2, l, 2, 3, 3, 1000)
	s2.AddSnapshot(snapshot(l, img, 3))
	if got := steps(plan(t, s2, wire.Hello{Run: "run", Have: 1})); !slices.Equal(got, []wire.StepInfo{{To: 3}}) {
		t.Errorf("large chain: plan %v, want full", got)
	}
	// A failed step bridges nothing; keep drops the oldest steps.
	s3 := New(1, 1)
	s3.SetRun("run")
	step(s3, l, 1, 2, 1, 10)
	bad := NewStep(2, 3, l)
	s3.AddStep(bad)
	s3.FinishStep(bad, nil, errors.New("encode failed"))
	s3.AddSnapshot(snapshot(l, img, 3))
	if got := steps(plan(t, s3, wire.Hello{Run: "run", Have: 2})); !slices.Equal(got, []wire.StepInfo{{To: 3}}) {
		t.Errorf("failed step: plan %v, want full", got)
	}
	if len(s3.Steps()) != 1 {
		t.Errorf("keep 1 retained %d steps", len(s3.Steps()))
	}
	if got := steps(plan(t, s3, wire.Hello{Run: "run", Have: 1})); !slices.Equal(got, []wire.StepInfo{{To: 3}}) {
		t.Errorf("a gap (step 1 -> 2 dropped): plan %v, want full", got)
	}
}

func TestResume(t *testing.T) {
	l, img := testChunkMap(t)
	s := New(8, 1)
	s.SetRun("run")
	s.AddSnapshot(snapshot(l, img, 2))
	step(s, l, 2, 3, 2, 10) // a relay that received full 2 and is receiving 2 -> 3
	tr := plan(t, s, wire.Hello{Resume: &wire.Resume{Run: "run", To: 2, Record: 3}})
	if !tr.Plan.Resumed || tr.First != 3 || !slices.Equal(steps(tr), []wire.StepInfo{{To: 2}, {From: 2, To: 3}}) {
		t.Fatalf("full resume: %+v first %d", tr.Plan, tr.First)
	}
	tr = plan(t, s, wire.Hello{Run: "run", Have: 1, Resume: &wire.Resume{Run: "run", From: 2, To: 3, Record: 1}})
	if !tr.Plan.Resumed || tr.First != 1 || tr.Plan.Target != 3 {
		t.Fatalf("delta resume: %+v first %d", tr.Plan, tr.First)
	}
	tr = plan(t, s, wire.Hello{Resume: &wire.Resume{Run: "run", From: 5, To: 6}})
	if tr.Plan.Resumed || !slices.Equal(steps(tr), []wire.StepInfo{{To: 2}, {From: 2, To: 3}}) {
		t.Fatalf("unknown step: %+v, want a fresh full plan", tr.Plan)
	}
}

// TestWaitAndRetire: a waiting plan returns when a version appears; a retired snapshot is
// not planned, Gone closes on an abort and the idle channel once the last reader leaves.
func TestWaitAndRetire(t *testing.T) {
	l, img := testChunkMap(t)
	s := New(8, 1)
	s.SetRun("run")
	got := make(chan *Transfer)
	go func() {
		tr, _ := s.Plan(context.Background(), wire.Hello{Wait: true})
		got <- tr
	}()
	released := make(chan bool, 1)
	v1 := NewSnapshot("run", 1, l, img, func() { released <- true })
	s.AddSnapshot(v1)
	tr := <-got
	if tr.Full != v1 {
		t.Fatalf("waiting plan got %+v", tr.Plan)
	}
	idle := s.Retire(v1, true)
	select {
	case <-v1.Gone():
	default:
		t.Fatal("abort did not close Gone")
	}
	select {
	case <-idle:
		t.Fatal("idle while a reader holds the snapshot")
	default:
	}
	tr.Release()
	<-idle
	if !<-released {
		t.Fatal("release did not run")
	}
	if tr := plan(t, s, wire.Hello{}); len(steps(tr)) != 0 {
		t.Fatalf("retired snapshot planned: %v", steps(tr))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Plan(ctx, wire.Hello{Wait: true}); err == nil {
		t.Fatal("a canceled wait returned a plan")
	}
}

func TestStepStreaming(t *testing.T) {
	l, _ := testChunkMap(t)
	st := NewStep(1, 2, l)
	got := make(chan []byte)
	go func() {
		f, _ := st.Frame(context.Background(), 0)
		got <- f
	}()
	st.Append([]byte("a"))
	if f := <-got; string(f) != "a" {
		t.Fatalf("frame %q", f)
	}
	st.Finish(nil, nil)
	if f, err := st.Frame(context.Background(), 1); f != nil || err != nil {
		t.Fatalf("after the end: %q %v", f, err)
	}
}

func TestManifest(t *testing.T) {
	l, img := testChunkMap(t)
	s := New(8, 2)
	s.SetRun("run")
	s.AddSnapshot(snapshot(l, img, 4))
	step(s, l, 4, 5, 1, 1)
	m, ok := s.Manifest("run", 4)
	if want := l.Hash(img, 1); !ok || len(m.Hashes) != len(want) || m.Hashes[0] != want[0] || m.Size != l.Size {
		t.Fatalf("snapshot manifest %+v %v", m, ok)
	}
	if m, ok := s.Manifest("run", 5); !ok || m.Hashes[0] != 5 {
		t.Fatalf("step manifest %+v %v", m, ok)
	}
	if _, ok := s.Manifest("other", 4); ok {
		t.Fatal("another run's manifest")
	}
}

// TestRawRecordHead: each chunk's head followed by the chunk's bytes is a valid frame holding
// the chunk's raw record, and readers asking at once get the same head.
func TestRawRecordHead(t *testing.T) {
	l, img := testChunkMap(t)
	snap := snapshot(l, img, 1)
	for i := range l.Chunks() {
		heads := make(chan []byte, 4)
		for range cap(heads) {
			go func() { heads <- snap.RawRecordHead(i) }()
		}
		head := <-heads
		for range cap(heads) - 1 {
			if other := <-heads; &other[0] != &head[0] {
				t.Fatalf("chunk %d: readers got different heads", i)
			}
		}
		_, off, n := l.Span(i)
		k, payload, _, err := wire.ParseFrame(append(slices.Clone(head), img[off:off+n]...))
		if err != nil || k != wire.KindRecord {
			t.Fatalf("chunk %d: %v %v", i, k, err)
		}
		rec, err := wire.ParseRecord(payload)
		if err != nil || rec.Chunk != i || rec.Op != wire.OpRaw || !slices.Equal(rec.Body, img[off:off+n]) {
			t.Fatalf("chunk %d: record %+v, %v", i, rec, err)
		}
	}
}

// TestGrowingSnapshot: a growing snapshot's records are readable once grown over, its end once
// complete; its manifest is not served while it grows; a retirement with abort ends every wait.
func TestGrowingSnapshot(t *testing.T) {
	l, img := testChunkMap(t)
	s := New(2, 1)
	s.SetRun("run")
	g := NewGrowing("run", 1, l, img, nil)
	s.AddSnapshot(g)
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	if err := g.WaitRecord(short(), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("record 0 before it arrived: %v", err)
	}
	tr := plan(t, s, wire.Hello{Wait: true})
	if tr.Full != g {
		t.Fatalf("a client with nothing is not planned the growing version: %+v", tr.Plan)
	}
	tr.Release()
	if _, ok := s.Manifest("run", 1); ok {
		t.Fatal("the manifest of a version still arriving was served")
	}
	g.Grow(2)
	if err := g.WaitRecord(short(), 1); err != nil {
		t.Fatalf("record 1 after Grow(2): %v", err)
	}
	if err := g.WaitComplete(short()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("complete before Complete: %v", err)
	}
	g.Complete([]uint64{7, 7, 7, 7, 7})
	if err := g.WaitComplete(short()); err != nil || !g.Whole() {
		t.Fatalf("after Complete: %v", err)
	}
	if m, ok := s.Manifest("run", 1); !ok || m.Hashes[0] != 7 {
		t.Fatalf("the manifest once whole: %v %v", m, ok)
	}

	h := NewGrowing("run", 2, l, img, nil)
	s.AddSnapshot(h)
	errc := make(chan error)
	go func() { errc <- h.WaitRecord(context.Background(), 3) }()
	s.Retire(h, true)
	if err := <-errc; err == nil {
		t.Fatal("a wait on a version given up returned nil")
	}
}
