// Package gate orders the CPU work of engine's Batcher, which runs two lanes: requests of at
// most one encoder batch (single queries of rollouts) and larger ones (Search-R1's 2,560-query
// POST). A batch in flight cannot be taken back, but bulk work is made of small units: the
// Batcher begins each bulk batch it encodes or searches at the Gate, and the encoder and index
// backends that take a context pause inside a batch (encoder/bert before each op of a layer,
// index/flat before each stripe of rows, index/compact before each unit of queries) through
// Wait(ctx). There:
//   - interactive work goes first: while an interactive job waits, no bulk unit begins, and an
//     interactive batch starts once the bulk units in flight have ended. So a single query that
//     arrives while a 2,560-query POST is encoded and searched waits for one op or stripe of
//     it, not for all of it, and then has the cores to itself;
//   - bulk work that pauses runs one unit at a time, in the order asked: the POST's encoder and
//     its search on the mapped flat index alternate op by stripe instead of running side by
//     side. Bulk work that cannot pause (FAISS's search, the GPU index's, an encoder without
//     a context) is one unit that runs beside them, as before, so that the batches encoded
//     meanwhile are searched together (BatcherOptions.MaxSearchBatch).
//
// Why not side by side: on a few cores, threaded work next to other threaded work does not
// only share them. OpenBLAS's OpenMP build runs one threaded call at a time and makes a second
// caller spin on a core until the first ends (exec_blas). Measured on 2 cores (MiniLM, 20k
// rows), a single query's search next to the POST's work often took 20-40 ms and up to 340 ms
// instead of 8, and the first op of an encoder batch, next to the search of the batch before,
// up to 100-600 ms instead of 11.
//
// It is a leaf package so that the backends (which engine imports) can reach it: the unit
// travels in the context, and a context without one never waits.
package gate

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Gate is shared by the interactive work, which holds it from a job's admission to its answer
// (Enter, Leave) and starts each batch once no bulk unit runs (Clear), and the bulk work, whose
// units begin and end at it (Begin, Unit.End, and Wait in between). While an interactive job
// is held, bulk work waits; each interactive job answered lets the bulk waiters run one more
// unit even while others are held, so a steady stream of interactive work slows bulk work but
// never stops it. Interactive batches may run side by side with each other (the interactive
// lane's encoder and search pipeline, as under 64 concurrent clients). Safe for concurrent
// use; the zero Gate is ready.
type Gate struct {
	held    atomic.Int64 // interactive jobs entered and not yet left (read without mu on Wait's fast path)
	waiting atomic.Int64 // bulk units waiting for the slot (likewise)
	pauses  atomic.Int64 // times bulk work waited for interactive work

	mu      sync.Mutex
	running int           // bulk units running
	slot    bool          // a unit of bulk work that pauses runs (they run one at a time)
	queue   []*waiter     // bulk units waiting for the slot, in the order they asked
	turns   uint64        // interactive jobs that left
	changed chan struct{} // closed and replaced when a job leaves or a bulk unit ends; nil until a waiter needs it
}

// waiter is one bulk unit waiting for the slot: its address is its place in the queue (not
// zero-sized, so that each has an address of its own).
type waiter struct{ _ byte }

// Unit is one bulk worker's run of work at a Gate: from Begin to End, a unit of it runs at a
// time, paused at each Wait of the contexts that carry it (With). Owned by one goroutine.
type Unit struct {
	g       *Gate
	slot    bool // its work pauses: it runs in the slot
	running bool // a unit runs (false after a Wait that ended with its context)
}

// Enter holds the gate for one interactive job: bulk work pauses at its next unit.
func (g *Gate) Enter() { g.held.Add(1) }

// Held is the number of interactive jobs holding the gate.
func (g *Gate) Held() int64 { return g.held.Load() }

// Leave ends one Enter (the job was answered or dropped) and wakes the bulk waiters.
func (g *Gate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held.Add(-1)
	g.turns++
	g.broadcast()
}

// Clear waits until no bulk unit runs, or ctx ends (then it returns ctx's error): the start of
// an interactive batch.
func (g *Gate) Clear(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.running > 0 {
		if err := g.block(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Begin waits until a bulk unit may run (after the interactive jobs held, or one of them
// answered, since it asked; with pauses, after the pausing units that asked before it too) and
// returns it running. pauses says that the work calls Wait between its units: it then runs
// one unit at a time with the other such work. Begin returns ctx's error, and begins nothing,
// when ctx ends first.
func (g *Gate) Begin(ctx context.Context, pauses bool) (*Unit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := &Unit{g: g, slot: pauses}
	if err := u.begin(ctx); err != nil {
		return nil, err
	}
	return u, nil
}

// End ends u's unit (if it runs).
func (u *Unit) End() {
	u.g.mu.Lock()
	defer u.g.mu.Unlock()
	u.end()
}

// Pauses counts the times bulk work waited for interactive work.
func (g *Gate) Pauses() int64 { return g.pauses.Load() }

// pause ends u's unit and begins its next one, after the interactive jobs held and the bulk
// units waiting; at once when there are none. With ctx's error, u no longer runs.
func (u *Unit) pause(ctx context.Context) error {
	g := u.g
	if g.held.Load() == 0 && g.waiting.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	u.end()
	return u.begin(ctx)
}

// begin waits, mu held, until u may run: no interactive job is held, or one left since it
// asked; in the slot, it is first in the queue and the slot is free. A unit whose ctx ends
// leaves the queue, so the ones behind it do not wait for it.
func (u *Unit) begin(ctx context.Context) error {
	g := u.g
	w, turns, paused := new(waiter), g.turns, false
	if u.slot {
		g.queue = append(g.queue, w)
		g.waiting.Add(1)
		defer g.waiting.Add(-1)
	}
	forSlot := func() bool { return u.slot && (g.queue[0] != w || g.slot) }
	for forSlot() || (g.held.Load() > 0 && g.turns == turns) {
		if !paused && !forSlot() {
			paused = true // only interactive work holds it back
			g.pauses.Add(1)
		}
		if err := g.block(ctx); err != nil {
			if u.slot {
				g.queue = slices.DeleteFunc(g.queue, func(q *waiter) bool { return q == w })
				g.broadcast()
			}
			return err
		}
	}
	if u.slot {
		g.queue = g.queue[1:]
		g.slot = true
	}
	g.running++
	u.running = true
	return nil
}

// end (mu held) lets the next unit, or interactive work, begin.
func (u *Unit) end() {
	if !u.running {
		return
	}
	u.running = false
	u.g.running--
	if u.slot {
		u.g.slot = false
	}
	u.g.broadcast()
}

// block releases mu until the gate changes or ctx ends, then takes it again.
func (g *Gate) block(ctx context.Context) error {
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	changed := g.changed
	g.mu.Unlock()
	defer g.mu.Lock()
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// broadcast wakes every waiter (mu held).
func (g *Gate) broadcast() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

type key struct{}

// With returns ctx carrying u: the work done under it is u's (Wait pauses it).
func With(ctx context.Context, u *Unit) context.Context { return context.WithValue(ctx, key{}, u) }

// Wait is a point where bulk work may pause: with a Unit in ctx (With), while interactive work
// is held or another bulk unit waits for the slot, it ends the unit and begins the next after
// them (see Gate); it returns ctx's error if ctx ends meanwhile. Without a Unit, or with
// nothing waiting, it returns nil at once (a context lookup and two atomic loads).
func Wait(ctx context.Context) error {
	if u, _ := ctx.Value(key{}).(*Unit); u != nil {
		return u.pause(ctx)
	}
	return nil
}
