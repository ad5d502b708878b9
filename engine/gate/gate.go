// Package gate gives interactive retrieval work priority over bulk work at the points where
// bulk work can pause. engine's Batcher runs two lanes: requests of at most one encoder batch
// (single queries of rollouts) and larger ones (Search-R1's 2,560-query POST). A batch in
// flight cannot be taken back, but bulk work is made of small units: the Batcher begins each
// bulk batch it encodes or searches at the Gate, and the encoder and index backends that take
// a context pause inside a batch (engine/bert before each op of a layer, engine/flatmap before
// each stripe of rows) through Wait(ctx). So a single query that arrives while a 2,560-query
// POST is encoded and searched waits for one unit of it, not for all of it.
//
// The two kinds of work also never run at the same time: an interactive batch starts once the
// bulk unit in flight has ended (Clear). On a few cores, work running side by side does not
// only share them: OpenBLAS's OpenMP build lets one sgemm call at a time run and makes the
// others spin until it ends, so a single query's search next to a bulk stripe's sgemm took
// 10-40x its idle time (measured on 2 cores).
//
// It is a leaf package so that the backends (which engine imports) can reach it: the Gate
// travels in the context, and a context without one never waits.
package gate

import (
	"context"
	"sync"
	"sync/atomic"
)

// Gate is shared by the interactive work, which holds it from a job's admission to its answer
// (Enter, Leave) and starts each batch once no bulk unit runs (Clear), and the bulk work,
// whose units begin and end at it (Begin, End, and Wait in between). While an interactive job
// is held, bulk work waits; each interactive job answered lets every bulk waiter run one more
// unit even while others are held, so a steady stream of interactive work slows bulk work but
// never stops it. Safe for concurrent use; the zero Gate is ready.
type Gate struct {
	held   atomic.Int64 // interactive jobs entered and not yet left (read without mu on Wait's fast path)
	pauses atomic.Int64 // times bulk work blocked

	mu      sync.Mutex
	running int           // bulk units begun and not ended
	turns   uint64        // interactive jobs that left
	changed chan struct{} // closed and replaced when a job leaves or the last bulk unit ends; nil until a waiter needs it
}

// Enter holds the gate for one interactive job: bulk work pauses at its next unit.
func (g *Gate) Enter() { g.held.Add(1) }

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

// Begin waits for bulk work's turn (no interactive job held, or one answered since it began
// waiting), then counts a bulk unit running until End. It returns ctx's error, and begins
// nothing, when ctx ends first.
func (g *Gate) Begin(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.turn(ctx); err != nil {
		return err
	}
	g.running++
	return nil
}

// End ends the bulk unit of a Begin.
func (g *Gate) End() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.end()
}

// Pauses counts the times bulk work blocked so that interactive work went first.
func (g *Gate) Pauses() int64 { return g.pauses.Load() }

// pause ends the caller's bulk unit and begins the next once it is bulk work's turn; the
// caller counts as running again when it returns, with ctx's error if ctx ended meanwhile.
func (g *Gate) pause(ctx context.Context) error {
	if g.held.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.end()
	err := g.turn(ctx)
	g.running++ // the caller's End follows, even on error
	return err
}

func (g *Gate) end() {
	if g.running--; g.running == 0 {
		g.broadcast()
	}
}

// turn waits, mu held, until bulk work may run: no interactive job is held, or one left since
// turn began.
func (g *Gate) turn(ctx context.Context) error {
	turns, blocked := g.turns, false
	for g.held.Load() > 0 && g.turns == turns {
		if !blocked {
			blocked = true
			g.pauses.Add(1)
		}
		if err := g.block(ctx); err != nil {
			return err
		}
	}
	return nil
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

// With returns ctx carrying g: the work done under it is a bulk unit begun at g (Begin).
func With(ctx context.Context, g *Gate) context.Context { return context.WithValue(ctx, key{}, g) }

// Wait is a point where bulk work may pause: with a Gate in ctx (With), while interactive work
// is held it ends the caller's unit, waits for bulk work's turn and begins the next; it returns
// ctx's error if ctx ends meanwhile. Without one, or with nothing held, it returns nil at once
// (a context lookup and an atomic load).
func Wait(ctx context.Context) error {
	if g, _ := ctx.Value(key{}).(*Gate); g != nil {
		return g.pause(ctx)
	}
	return nil
}
