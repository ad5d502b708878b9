package gate

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestShareCharge steps the lag with the weights as they are (1:1).
func TestShareCharge(t *testing.T) {
	if interactiveWeight != 1 || bulkWeight != 1 {
		t.Fatal("the steps below are written for equal weights")
	}
	const ms = time.Millisecond
	type step struct {
		bulk   bool
		d      time.Duration
		others bool
		lag    time.Duration // after the step
		owed   bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"both busy: bulk is owed the interactive time beyond the burst", []step{
			{false, burst + 10*ms, true, -burst - 10*ms, true},
			{true, 4 * ms, true, -burst - 6*ms, true},
			{true, 6 * ms, true, -burst, false},
			{true, burst + 2*ms, true, 2 * ms, false},
		}},
		{"a lane alone banks no credit", []step{
			{true, 50 * ms, false, 0, false},
			{false, 50 * ms, false, 0, false},
			{false, burst + 6*ms, true, -burst - 6*ms, true},
		}},
		{"a lane alone pays back what it owes, then stops at 0", []step{
			{false, burst + 6*ms, true, -burst - 6*ms, true},
			{true, 2 * ms, false, -burst - 4*ms, true},
			{true, burst + 4*ms, false, 0, false},
			{true, 8 * ms, true, 8 * ms, false},
			{false, 5 * ms, false, 3 * ms, false},
			{false, 10 * ms, false, 0, false},
		}},
	} {
		var s share
		for i, st := range tc.steps {
			s.charge(st.bulk, st.d, st.others)
			if s.lag != st.lag || s.bulkOwed() != st.owed {
				t.Errorf("%s, step %d: lag %v owed %v, want %v %v", tc.name, i, s.lag, s.bulkOwed(), st.lag, st.owed)
			}
		}
	}
}

// Under saturation (an interactive job is held all the time, and bulk work always waits) the
// lanes split the gate's time by their weights, to within one unit and the burst, whatever their units'
// sizes. The fake clock moves only inside a running unit, and the lanes never run side by
// side, so each advance is its lane's service.
func TestSaturatedLanesShareTheTime(t *testing.T) {
	for _, tc := range []struct{ interactive, bulk time.Duration }{
		{7 * time.Millisecond, 3 * time.Millisecond},  // single-query batches beside encoder ops
		{2 * time.Millisecond, 15 * time.Millisecond}, // short searches beside a 64-query op
	} {
		g, c := newGate()
		g.Enter()
		const total = 3 * time.Second
		var served [2]time.Duration
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			u := begin(t, g)
			ctx := With(context.Background(), u)
			for c.now().Sub(time.Unix(0, 0)) < total {
				c.advance(tc.bulk)
				served[bulkLane] += tc.bulk
				if err := Wait(ctx); err != nil {
					t.Error(err)
					return
				}
			}
			u.End()
		}()
		until(func() bool { return g.waiting.Load() == 1 }) // bulk work waits before the stream starts
		go func() {
			defer wg.Done()
			for c.now().Sub(time.Unix(0, 0)) < total {
				u, err := g.Interactive(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				c.advance(tc.interactive)
				served[interactiveLane] += tc.interactive
				u.End()
			}
			g.Leave() // the stream of interactive jobs ends: bulk work no longer waits for it
		}()
		wg.Wait()
		all := served[0] + served[1]
		got := float64(served[bulkLane]) / float64(all)
		want := float64(bulkWeight) / (bulkWeight + interactiveWeight)
		tol := float64(max(tc.interactive, tc.bulk)+burst) / float64(all) // the first burst is the interactive lane's
		if got < want-tol || got > want+tol {
			t.Errorf("units of %v and %v: bulk work had %.3f of the time (%v of %v), want %.3f +- %.3f",
				tc.interactive, tc.bulk, got, served[bulkLane], all, want, tol)
		}
	}
}
