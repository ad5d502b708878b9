// Package testctx holds contexts for tests of work that checks its context part way (index/flat
// between stripes, index/compact between units of queries).
package testctx

import "context"

// LiveFor returns a context whose Err is nil for its first n calls and context.Canceled after:
// it ends at a known check, whatever the timing.
func LiveFor(n int) context.Context { return &liveFor{context.Background(), n} }

type liveFor struct {
	context.Context
	n int
}

func (c *liveFor) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}
