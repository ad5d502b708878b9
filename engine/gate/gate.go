// Package gate gives interactive retrieval work priority over bulk work at the points where
// bulk work can pause. engine's Batcher runs two lanes: requests of at most one encoder batch
// (single queries of rollouts) and larger ones (Search-R1's 2,560-query POST). A batch in
// flight cannot be taken back, but bulk work is made of small units: the Batcher waits at the
// Gate before each bulk batch it encodes or searches, and the encoder and index backends that
// take a context wait inside a batch (engine/bert before each op of a layer, engine/flatmap
// before each stripe of rows), through Wait(ctx). So a single query that arrives while a
// 2,560-query POST is encoded and searched waits for one unit of it, not for the whole POST.
//
// It is a leaf package so that the backends (which engine imports) can reach it: the Gate
// travels in the context, and a context without one never waits.
package gate

import (
	"context"
	"sync"
	"sync/atomic"
)

// Gate is shared by the interactive work, which holds it open from a job's admission to its
// answer (Enter, Leave), and the bulk work, which passes it between units (Wait). While an
// interactive job is held, bulk work waits; each interactive job answered lets every bulk
// waiter run one more unit even while others are held, so a steady stream of interactive work
// slows bulk work but never stops it. Safe for concurrent use; the zero Gate is ready.
type Gate struct {
	held   atomic.Int64 // interactive jobs entered and not yet left (read without mu on Wait's fast path)
	pauses atomic.Int64 // Waits that blocked

	mu      sync.Mutex
	turns   uint64        // interactive jobs that left
	changed chan struct{} // closed and replaced by every Leave; nil until a Wait needs it
}

// Enter holds the gate for one interactive job: bulk work pauses at its next Wait.
func (g *Gate) Enter() { g.held.Add(1) }

// Leave ends one Enter (the job was answered or dropped) and wakes the bulk waiters.
func (g *Gate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held.Add(-1)
	g.turns++
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// Pauses counts the Waits that blocked (bulk work that gave way to interactive work).
func (g *Gate) Pauses() int64 { return g.pauses.Load() }

// wait blocks while interactive jobs are held, until one of them leaves or none is held,
// or ctx ends (then it returns ctx's error).
func (g *Gate) wait(ctx context.Context) error {
	if g.held.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	turns, blocked := g.turns, false
	for g.held.Load() > 0 && g.turns == turns {
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		changed := g.changed
		g.mu.Unlock()
		if !blocked {
			blocked = true
			g.pauses.Add(1)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
	return nil
}

type key struct{}

// With returns ctx carrying g: the work done under it is bulk work that waits at g.
func With(ctx context.Context, g *Gate) context.Context { return context.WithValue(ctx, key{}, g) }

// Wait is a point where bulk work may pause: with a Gate in ctx (With), it blocks while
// interactive work is held (see Gate), and returns ctx's error if ctx ends meanwhile. Without
// one it returns nil at once. Cheap: a context lookup and an atomic load when nothing waits.
func Wait(ctx context.Context) error {
	if g, _ := ctx.Value(key{}).(*Gate); g != nil {
		return g.wait(ctx)
	}
	return nil
}
