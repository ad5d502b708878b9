package gate

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// waitPauses yields until g counts n pauses (a Wait blocked), so a test acts only once the
// bulk side waits.
func waitPauses(g *Gate, n int64) {
	for g.Pauses() < n {
		runtime.Gosched()
	}
}

// The order of events proves the waits: the bulk side records only after Wait returns, and
// the test records before it lets Wait return.
func TestBulkWaitsForInteractiveWork(t *testing.T) {
	var g Gate
	ctx := With(context.Background(), &g)
	if err := Wait(ctx); err != nil || g.Pauses() != 0 {
		t.Fatalf("Wait with nothing held: %v, %d pauses; want nil at once", err, g.Pauses())
	}
	if err := Wait(context.Background()); err != nil {
		t.Fatalf("Wait without a gate: %v", err)
	}

	events := make(chan string, 8)
	bulk := func() {
		if err := Wait(ctx); err != nil {
			t.Error(err)
		}
		events <- "bulk unit"
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
	if err := Wait(ctx); err != nil || g.Pauses() != 2 {
		t.Fatalf("Wait after every job left: %v, %d pauses; want nil at once", err, g.Pauses())
	}
}

// A bulk unit whose context ends while it waits gives up with the context's error.
func TestWaitEndsWithItsContext(t *testing.T) {
	var g Gate
	g.Enter()
	defer g.Leave()
	ctx, cancel := context.WithCancel(With(context.Background(), &g))
	done := make(chan error)
	go func() { done <- Wait(ctx) }()
	waitPauses(&g, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after its context ended: %v, want context.Canceled", err)
	}
}
