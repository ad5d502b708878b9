// Package gate orders the CPU work of engine's Batcher, which runs two lanes: requests of at
// most one encoder batch (single queries of rollouts) and larger ones (Search-R1's 2,560-query
// POST). A batch in flight cannot be taken back, but bulk work is made of small units: the
// Batcher begins each bulk batch it encodes or searches at the Gate, and the encoder and index
// backends that take a context pause inside a batch (encoder/bert before each op of a layer,
// index/flat before each stripe of rows, index/compact before each unit of queries) through
// Wait(ctx). There:
//   - the lanes share the time by weighted fair queuing over their units (share.go): while
//     both have work, bulk units begin only while bulk work is behind its share (half the
//     time) and interactive batches only while it is not, and neither lane runs beside the
//     other. So a single query that arrives while a 2,560-query POST is encoded and searched
//     waits for one op or stripe of it, not for all of it, and then has the cores to itself;
//     and a stream of single queries that fills the machine slows the POST to about half its
//     speed, never stops it (strict priority would: each single's batch is many bulk ops);
//   - bulk work that pauses runs one unit at a time, in the order asked: the POST's encoder and
//     its search on the mapped flat index alternate op by stripe instead of running side by
//     side. Bulk work that cannot pause (FAISS's search, the GPU index's, an encoder without
//     a context) is one unit that runs beside them, so that the batches encoded
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
	"time"
)

// Gate is shared by the interactive work, which holds it from a job's admission to its answer
// (Enter, Leave) and runs each batch as a unit (Interactive, Unit.End), and the bulk work,
// whose units begin and end at it (Begin, Unit.End, and Wait in between). Each lane's units
// are charged the time they run (share); while interactive jobs are held, a bulk unit begins
// only while bulk work is owed time, and while bulk units wait, an interactive batch begins
// only while bulk work is not owed time; a lane's units never run beside the other lane's.
// Interactive batches may run side by side with each other (the interactive lane's encoder
// and search pipeline, as under 64 concurrent clients). Safe for concurrent use; the zero
// Gate is ready.
type Gate struct {
	held    atomic.Int64 // interactive jobs entered and not yet left (read without mu on Wait's fast path)
	waiting atomic.Int64 // bulk units waiting for the slot (likewise)
	pauses  atomic.Int64 // times bulk work waited for interactive work

	mu          sync.Mutex
	running     [2]int        // units running, by lane (bulkLane, interactiveLane)
	bulkWaiting int           // bulk units waiting to begin
	slot        bool          // a unit of bulk work that pauses runs (they run one at a time)
	queue       []*waiter     // bulk units waiting for the slot, in the order they asked
	share       share         // the lanes' service so far
	charged     time.Time     // the time up to which the running lane was charged
	changed     chan struct{} // closed and replaced when a job leaves or a unit begins or ends; nil until a waiter needs it

	// Clock is what the lanes' units are timed with (nil: time.Now). Set it before first use;
	// a test's clock that stands still makes the gate strict priority (interactive first).
	Clock func() time.Time
}

// The lanes, as indexes of Gate.running.
const (
	bulkLane = iota
	interactiveLane
)

// waiter is one bulk unit waiting for the slot: its address is its place in the queue (not
// zero-sized, so that each has an address of its own).
type waiter struct{ _ byte }

// Unit is one worker's run of work at a Gate: from Begin (or Interactive) to End. A bulk unit
// is paused at each Wait of the contexts that carry it (With). Owned by one goroutine.
type Unit struct {
	g       *Gate
	lane    int
	slot    bool // its work pauses: it runs in the slot
	running bool // a unit runs (false after a Wait that ended with its context)
}

// Enter holds the gate for one interactive job: bulk work pauses at its next unit unless it
// is owed time.
func (g *Gate) Enter() { g.held.Add(1) }

// Held is the number of interactive jobs holding the gate.
func (g *Gate) Held() int64 { return g.held.Load() }

// Leave ends one Enter (the job was answered or dropped) and wakes the bulk waiters.
func (g *Gate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.account()
	g.held.Add(-1)
	g.broadcast()
}

// Interactive waits until an interactive batch may run (no bulk unit runs, and bulk work that
// waits is not owed time) and returns it running; End ends it. It returns ctx's error, and
// begins nothing, when ctx ends first.
func (g *Gate) Interactive(ctx context.Context) (*Unit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		g.account()
		if g.running[bulkLane] == 0 && (g.bulkWaiting == 0 || !g.share.bulkOwed()) {
			break
		}
		if err := g.block(ctx); err != nil {
			return nil, err
		}
	}
	u := &Unit{g: g, lane: interactiveLane}
	u.start()
	return u, nil
}

// Begin waits until a bulk unit may run (no interactive batch runs, and no interactive job is
// held unless bulk work is owed time; with pauses, after the pausing units that asked before
// it too) and returns it running. pauses says that the work calls Wait between its units: it
// then runs one unit at a time with the other such work. Begin returns ctx's error, and
// begins nothing, when ctx ends first.
func (g *Gate) Begin(ctx context.Context, pauses bool) (*Unit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := &Unit{g: g, lane: bulkLane, slot: pauses}
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

// ChargeInteractive adds d to the interactive lane's service as if a unit had run for it: work
// of an interactive job done outside the gate's units (the server's parsing, JSON and answer
// rows for a single query, timed by its caller) runs beside bulk units and takes their cores,
// while the gate charges bulk work its units' whole wall time; so bulk work is owed it back.
func (g *Gate) ChargeInteractive(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.account()
	g.share.charge(false, d, g.bulkWaiting > 0 || g.running[bulkLane] > 0)
	g.broadcast()
}

// Pauses counts the times bulk work waited for interactive work.
func (g *Gate) Pauses() int64 { return g.pauses.Load() }

// pause ends u's unit and begins its next one, after the interactive work and the bulk units
// waiting (see Begin); at once when there are none. With ctx's error, u no longer runs.
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

// begin waits, mu held, until bulk unit u may run: no interactive batch runs, and no
// interactive job is held or bulk work is owed time; in the slot, it is first in the queue
// and the slot is free. A unit whose ctx ends leaves the queue, so the ones behind it do not
// wait for it.
func (u *Unit) begin(ctx context.Context) error {
	g := u.g
	w, paused := new(waiter), false
	if u.slot {
		g.queue = append(g.queue, w)
		g.waiting.Add(1)
		defer g.waiting.Add(-1)
	}
	g.bulkWaiting++
	defer func() { g.bulkWaiting-- }()
	forSlot := func() bool { return u.slot && (g.queue[0] != w || g.slot) }
	forInteractive := func() bool {
		g.account()
		return g.running[interactiveLane] > 0 || (g.held.Load() > 0 && !g.share.bulkOwed())
	}
	for forSlot() || forInteractive() {
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
	u.start()
	return nil
}

// start (mu held) counts u as running from now on.
func (u *Unit) start() {
	u.g.account()
	u.g.running[u.lane]++
	u.running = true
	u.g.broadcast()
}

// end (mu held) charges u's lane and lets the next unit begin.
func (u *Unit) end() {
	if !u.running {
		return
	}
	g := u.g
	g.account()
	u.running = false
	g.running[u.lane]--
	if u.slot {
		g.slot = false
	}
	g.broadcast()
}

// account (mu held) charges the lane whose units run for the time since the last charge (the
// lanes never run side by side; a lane's units that overlap are charged once).
func (g *Gate) account() {
	now := time.Now
	if g.Clock != nil {
		now = g.Clock
	}
	t := now()
	d := t.Sub(g.charged)
	g.charged = t
	switch {
	case g.running[bulkLane] > 0:
		g.share.charge(true, d, g.held.Load() > 0)
	case g.running[interactiveLane] > 0:
		g.share.charge(false, d, g.bulkWaiting > 0)
	}
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
// is held or another bulk unit waits for the slot, it ends the unit and begins the next when
// its turn comes (see Gate); it returns ctx's error if ctx ends meanwhile. Without a Unit, or with
// nothing waiting, it returns nil at once (a context lookup and two atomic loads).
func Wait(ctx context.Context) error {
	if u, _ := ctx.Value(key{}).(*Unit); u != nil {
		return u.pause(ctx)
	}
	return nil
}
