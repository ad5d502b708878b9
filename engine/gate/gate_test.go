package gate

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// waitPauses yields until g counts n pauses (bulk work blocked), so a test acts only once the
// bulk side waits.
func waitPauses(g *Gate, n int64) {
	for g.Pauses() < n {
		runtime.Gosched()
	}
}

// Bulk units begin only when no interactive job is held, or one more per job answered. The
// order of events proves the waits: the bulk side records only after Begin returns, and the
// test records before it lets Begin return.
func TestBulkWaitsForInteractiveWork(t *testing.T) {
	var g Gate
	ctx := context.Background()
	if err := g.Begin(ctx); err != nil || g.Pauses() != 0 {
		t.Fatalf("Begin with nothing held: %v, %d pauses; want nil at once", err, g.Pauses())
	}
	g.End()

	events := make(chan string, 8)
	bulk := func() {
		if err := g.Begin(ctx); err != nil {
			t.Error(err)
		}
		events <- "bulk unit"
		g.End()
	}
	g.Enter()
	g.Enter()
	go bulk()
	waitPauses(&g, 1)
	events <- "first interactive job answered"
	g.Leave() // one job is still held, but bulk work gets one unit per job answered
	if got := <-events + ", " + <-events; got != "first interactive job answered, bulk unit" {
		t.Fatalf("events %q", got)
	}
	go bulk()
	waitPauses(&g, 2)
	events <- "second interactive job answered"
	g.Leave()
	if got := <-events + ", " + <-events; got != "second interactive job answered, bulk unit" {
		t.Fatalf("events %q", got)
	}
}

// Interactive work starts once the bulk unit in flight ends: at End, or at the unit's next
// pause point (Wait), which then waits for the interactive work.
func TestInteractiveWaitsForTheBulkUnitInFlight(t *testing.T) {
	var g Gate
	ctx := With(context.Background(), &g)
	if err := Wait(context.Background()); err != nil {
		t.Fatalf("Wait without a gate: %v", err)
	}
	if err := g.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Wait(ctx); err != nil || g.Pauses() != 0 {
		t.Fatalf("Wait with nothing held: %v, %d pauses; want nil at once", err, g.Pauses())
	}
	events := make(chan string, 8)
	cleared := func() {
		if err := g.Clear(context.Background()); err != nil {
			t.Error(err)
		}
		events <- "interactive batch"
	}
	g.Enter()
	go cleared()
	events <- "bulk unit ended"
	g.End()
	if got := <-events + ", " + <-events; got != "bulk unit ended, interactive batch" {
		t.Fatalf("events %q", got)
	}

	g.Leave()
	if err := g.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	g.Enter()
	go func() {
		if err := Wait(ctx); err != nil { // ends the unit, then waits for the job
			t.Error(err)
		}
		events <- "next bulk unit"
		g.End()
	}()
	cleared() // the unit in flight reached its pause point
	if got := <-events; got != "interactive batch" {
		t.Fatalf("events %q", got)
	}
	g.Leave()
	if got := <-events; got != "next bulk unit" {
		t.Fatalf("events %q", got)
	}
}

// Bulk work whose context ends while it waits gives up with the context's error.
func TestWaitEndsWithItsContext(t *testing.T) {
	var g Gate
	g.Enter()
	defer g.Leave()
	ctx, cancel := context.WithCancel(With(context.Background(), &g))
	done := make(chan error)
	go func() { done <- g.Begin(ctx) }()
	waitPauses(&g, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin after its context ended: %v, want context.Canceled", err)
	}
}
