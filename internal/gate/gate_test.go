package gate

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
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

// interactive runs an interactive batch and records it.
func interactive(t *testing.T, g *Gate, ev events) {
	u, err := g.Interactive(context.Background())
	if err != nil {
		t.Error(err)
		return
	}
	ev <- "interactive batch"
	u.End()
}

// clock is a fake clock for a Gate: it moves only when a test advances it, so the lanes'
// shares depend on the work the test says each unit did, not on the machine.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newGate returns a Gate on a fake clock.
func newGate() (*Gate, *clock) {
	c := &clock{}
	return &Gate{Clock: c.now}, c
}

// While interactive jobs are held, bulk units begin only while bulk work is owed time: after
// interactive work ran burst + d, bulk work runs d*bulkWeight/interactiveWeight, then waits
// again.
// The order of events proves the waits: each side records only once it runs, and the test
// records before it lets it run.
func TestBulkWaitsForItsShare(t *testing.T) {
	g, c := newGate()
	begin(t, g).End()
	if g.Pauses() != 0 {
		t.Fatalf("%d pauses with nothing held", g.Pauses())
	}
	ev := make(events, 8)
	g.Enter()
	defer g.Leave()
	units := make(chan *Unit)
	go func() {
		u := begin(t, g)
		ev <- "bulk unit"
		units <- u
	}()
	until(func() bool { return g.Pauses() == 1 })
	u, err := g.Interactive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.advance(burst + 10*time.Millisecond)
	ev <- "interactive batch ran its burst and 10 ms"
	u.End() // bulk work is now owed 10 ms (equal weights), although a job is still held
	ev.expect(t, "interactive batch ran its burst and 10 ms", "bulk unit")

	bulk := <-units
	ctx := With(context.Background(), bulk)
	go func() { // waits for the bulk unit
		u, err := g.Interactive(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		ev <- "interactive batch"
		c.advance(3 * time.Millisecond)
		u.End()
	}()
	c.advance(4 * time.Millisecond)
	if err := Wait(ctx); err != nil { // still owed 6 ms: it goes on
		t.Fatal(err)
	}
	c.advance(7 * time.Millisecond)
	ev <- "bulk ran 11 ms"
	if err := Wait(ctx); err != nil { // 1 ms ahead: the interactive batch goes first, for 3 ms
		t.Fatal(err)
	}
	ev <- "bulk unit after the interactive batch"
	bulk.End()
	ev.expect(t, "bulk ran 11 ms", "interactive batch", "bulk unit after the interactive batch")
	if g.Pauses() != 2 {
		t.Errorf("%d pauses, want 2", g.Pauses())
	}
}

// Interactive work starts once the bulk unit in flight ends: at End, or at the unit's next
// pause point (Wait), which then waits for the interactive work.
func TestInteractiveWaitsForTheBulkUnitInFlight(t *testing.T) {
	g, _ := newGate()
	if err := Wait(context.Background()); err != nil {
		t.Fatalf("Wait without a unit: %v", err)
	}
	u := begin(t, g)
	ctx := With(context.Background(), u)
	if err := Wait(ctx); err != nil || g.Pauses() != 0 {
		t.Fatalf("Wait with nothing waiting: %v, %d pauses; want nil at once", err, g.Pauses())
	}
	ev := make(events, 8)
	g.Enter()
	go interactive(t, g, ev)
	ev <- "bulk unit ended"
	u.End()
	ev.expect(t, "bulk unit ended", "interactive batch")

	g.Leave()
	u = begin(t, g)
	ctx = With(context.Background(), u)
	g.Enter()
	go func() {
		if err := Wait(ctx); err != nil { // ends the unit, then waits for the job
			t.Error(err)
		}
		ev <- "next bulk unit"
		u.End()
	}()
	interactive(t, g, ev) // the unit in flight reached its pause point
	ev.expect(t, "interactive batch")
	g.Leave()
	ev.expect(t, "next bulk unit")
}

// Bulk units run one at a time, in the order they asked: a unit that reaches a pause point
// while another waits lets that one run first.
func TestBulkUnitsTakeTurns(t *testing.T) {
	g, _ := newGate()
	a := begin(t, g)
	ev := make(events, 8)
	go func() {
		b := begin(t, g)
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
	a = begin(t, g)
	shared, err := g.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	a.End()
	g.Enter()
	defer g.Leave()
	go interactive(t, g, ev)
	ev <- "shared unit ended"
	shared.End()
	ev.expect(t, "shared unit ended", "interactive batch")
}

// Bulk work whose context ends while it waits gives up with the context's error and leaves
// its place: the unit behind it and interactive work go on.
func TestWaitEndsWithItsContext(t *testing.T) {
	g, _ := newGate()
	g.Enter()
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := g.Begin(ctx, true)
		gaveUp <- err
	}()
	until(func() bool { return g.Pauses() == 1 })
	next := make(chan *Unit)
	go func() { next <- begin(t, g) }()
	until(func() bool { return g.waiting.Load() == 2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin after its context ended: %v, want context.Canceled", err)
	}
	g.Leave()
	(<-next).End()
	ev := make(events, 1)
	interactive(t, g, ev)
	ev.expect(t, "interactive batch")

	u := begin(t, g)
	g.Enter()
	defer g.Leave()
	ctx, cancel = context.WithCancel(With(context.Background(), u))
	cancel()
	if err := Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after its context ended: %v, want context.Canceled", err)
	}
	u.End() // a no-op: the unit ended at the Wait
	interactive(t, g, ev)
	ev.expect(t, "interactive batch")
}

// Interactive work done outside the units and charged by ChargeInteractive is owed back to
// bulk work as if a unit had run it: a bulk unit held back by a held job begins once the charge
// passes the burst.
func TestChargeInteractiveOwesBulk(t *testing.T) {
	g, _ := newGate()
	g.Enter()
	defer g.Leave()
	ev := make(events, 4)
	done := make(chan *Unit)
	go func() {
		u := begin(t, g)
		ev <- "bulk unit"
		done <- u
	}()
	until(func() bool { return g.Pauses() == 1 })
	g.ChargeInteractive(burst)
	ev <- "charged the burst"
	g.ChargeInteractive(time.Millisecond)
	ev.expect(t, "charged the burst", "bulk unit")
	(<-done).End()
}
