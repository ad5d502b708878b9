package gate

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
)

// until yields until cond holds, so a test acts only once the other side waits.
func until(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// begin is Begin that must succeed.
func begin(t *testing.T, g *Gate) *Unit {
	u, err := g.Begin(context.Background(), true)
	if err != nil {
		t.Error(err)
	}
	return u
}

// events collects what the goroutines of a test did, in order.
type events chan string

// expect checks that the next events are want.
func (e events) expect(t *testing.T, want ...string) {
	t.Helper()
	got := make([]string, len(want))
	for i := range got {
		got[i] = <-e
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// interactive starts an interactive batch (Clear) and records it.
func interactive(t *testing.T, g *Gate, ev events) {
	if err := g.Clear(context.Background()); err != nil {
		t.Error(err)
	}
	ev <- "interactive batch"
}

// Bulk units begin only when no interactive job is held, or one more per job answered. The
// order of events proves the waits: the bulk side records only once it runs, and the test
// records before it lets it run.
func TestBulkWaitsForInteractiveWork(t *testing.T) {
	var g Gate
	begin(t, &g).End()
	if g.Pauses() != 0 {
		t.Fatalf("%d pauses with nothing held", g.Pauses())
	}
	ev := make(events, 8)
	bulk := func() {
		u := begin(t, &g)
		ev <- "bulk unit"
		u.End()
	}
	g.Enter()
	g.Enter()
	go bulk()
	until(func() bool { return g.Pauses() == 1 })
	ev <- "first interactive job answered"
	g.Leave() // one job is still held, but bulk work gets one unit per job answered
	ev.expect(t, "first interactive job answered", "bulk unit")
	go bulk()
	until(func() bool { return g.Pauses() == 2 })
	ev <- "second interactive job answered"
	g.Leave()
	ev.expect(t, "second interactive job answered", "bulk unit")
}

// Interactive work starts once the bulk unit in flight ends: at End, or at the unit's next
// pause point (Wait), which then waits for the interactive work.
func TestInteractiveWaitsForTheBulkUnitInFlight(t *testing.T) {
	var g Gate
	if err := Wait(context.Background()); err != nil {
		t.Fatalf("Wait without a unit: %v", err)
	}
	u := begin(t, &g)
	ctx := With(context.Background(), u)
	if err := Wait(ctx); err != nil || g.Pauses() != 0 {
		t.Fatalf("Wait with nothing waiting: %v, %d pauses; want nil at once", err, g.Pauses())
	}
	ev := make(events, 8)
	g.Enter()
	go interactive(t, &g, ev)
	ev <- "bulk unit ended"
	u.End()
	ev.expect(t, "bulk unit ended", "interactive batch")

	g.Leave()
	u = begin(t, &g)
	ctx = With(context.Background(), u)
	g.Enter()
	go func() {
		if err := Wait(ctx); err != nil { // ends the unit, then waits for the job
			t.Error(err)
		}
		ev <- "next bulk unit"
		u.End()
	}()
	interactive(t, &g, ev) // the unit in flight reached its pause point
	ev.expect(t, "interactive batch")
	g.Leave()
	ev.expect(t, "next bulk unit")
}

// Bulk units run one at a time, in the order they asked: a unit that reaches a pause point
// while another waits lets that one run first.
func TestBulkUnitsTakeTurns(t *testing.T) {
	var g Gate
	a := begin(t, &g)
	ev := make(events, 8)
	go func() {
		b := begin(t, &g)
		ev <- "b's unit"
		b.End()
	}()
	until(func() bool { return g.waiting.Load() == 1 })
	if err := Wait(With(context.Background(), a)); err != nil {
		t.Fatal(err)
	}
	ev <- "a's next unit"
	a.End()
	ev.expect(t, "b's unit", "a's next unit")
	if g.Pauses() != 0 {
		t.Errorf("%d pauses counted for bulk units waiting for each other, want 0", g.Pauses())
	}

	// Work that cannot pause (FAISS's search) runs beside the slot's, but not beside
	// interactive work.
	a = begin(t, &g)
	shared, err := g.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	a.End()
	g.Enter()
	defer g.Leave()
	go interactive(t, &g, ev)
	ev <- "shared unit ended"
	shared.End()
	ev.expect(t, "shared unit ended", "interactive batch")
}

// Bulk work whose context ends while it waits gives up with the context's error and leaves
// its place: the unit behind it and interactive work go on.
func TestWaitEndsWithItsContext(t *testing.T) {
	var g Gate
	g.Enter()
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := g.Begin(ctx, true)
		gaveUp <- err
	}()
	until(func() bool { return g.Pauses() == 1 })
	next := make(chan *Unit)
	go func() { next <- begin(t, &g) }()
	until(func() bool { return g.waiting.Load() == 2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin after its context ended: %v, want context.Canceled", err)
	}
	g.Leave()
	(<-next).End()
	if err := g.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}

	u := begin(t, &g)
	g.Enter()
	defer g.Leave()
	ctx, cancel = context.WithCancel(With(context.Background(), u))
	cancel()
	if err := Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after its context ended: %v, want context.Canceled", err)
	}
	u.End() // a no-op: the unit ended at the Wait
	if err := g.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}
}
