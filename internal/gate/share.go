package gate

import "time"

// The lanes' weights: under saturation (both lanes have work waiting all the time) the
// interactive lane gets interactiveWeight/(interactiveWeight+bulkWeight) of the gate's time
// and bulk work the rest. Equal: beside single queries from clients that each send their next
// once answered (a closed loop that fills the machine), each lane then runs at about half its
// idle speed, a POST taking ~2x its idle time and the singles ~2x their idle latency, which
// leaves room under the goals (2.5x and 3x) for the singles' work outside the gate that no
// charge counts (their sockets' kernel work, task switches; their parsing and answer JSON are
// charged: Gate.ChargeInteractive). Two to one
// (a third for bulk work) took a 512-query POST to 2.2-4.4x its idle time:
// docs/measurements/2026-12-07-query-floor-zen4.md.
const (
	interactiveWeight = 1
	bulkWeight        = 1
)

// burst is the interactive time bulk work may fall behind before it is owed any: at light
// load a single query's whole batch (encoding, then search: ~10 ms for MiniLM here) runs
// without a bulk op in between, and under saturation the shares are the same.
const burst = 30 * time.Millisecond

// share is the weighted fair queuing of the two lanes over their units' time: lag is bulk
// work's service times interactiveWeight minus the interactive lane's times bulkWeight, so it
// is 0 when each lane had its weight's share, and negative while bulk work is behind. A
// lane with no work waiting banks no credit: time the other lane runs alone moves lag towards
// 0, never past it, so a lane that arrives after a quiet spell is neither owed a burst nor
// made to pay one back.
type share struct {
	lag time.Duration
}

// charge adds d of service to a lane (bulk or interactive); others says whether the other
// lane has work waiting or running.
func (s *share) charge(bulk bool, d time.Duration, others bool) {
	before := s.lag
	if bulk {
		s.lag += d * interactiveWeight
		if !others {
			s.lag = min(s.lag, max(before, 0))
		}
		return
	}
	s.lag -= d * bulkWeight
	if !others {
		s.lag = max(s.lag, min(before, 0))
	}
}

// bulkOwed reports whether bulk work is behind its share by more than burst: when both lanes
// wait, it goes first; otherwise the interactive lane does.
func (s *share) bulkOwed() bool { return s.lag < -burst*bulkWeight }
