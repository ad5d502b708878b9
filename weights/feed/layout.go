package feed

import (
	"slices"
	"sync"
	"time"

	"needle/weights/wire"
)

// Layout decides who pulls from whom among the receivers that joined a sender (wire.Join):
// the re-serving ones in a tree of Fanout children per node, in the order they joined (the
// first pulls from the sender; with Fanout 1 a chain: each forwards records while they
// arrive, so a version crosses every link once and reaches the last host one chunk per hop
// after the first), and the others as leaves below the tree's last nodes, whose uplinks are
// the ones left free. A member that leaves (its connection closes or goes silent) is dropped
// and the layout made again: the hosts below it are told their new route at once, and have
// already fallen back to the next upstream of their old one if they noticed first.
type Layout struct {
	Fanout int // children of a relay; 1 or less: a chain

	mu      sync.Mutex
	members []*member // in the order they joined
}

// member is one joined receiver.
type member struct {
	join  wire.Join
	route []string
	// routes holds the newest route not yet sent (capacity 1: an older one is replaced).
	routes chan []string
}

// add makes j a member, replacing a member that re-serves on the same address (a restarted
// host whose old connection has not gone silent yet), and lays the members out again.
func (l *Layout) add(j wire.Join) *member {
	m := &member{join: j, routes: make(chan []string, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if j.Serve != "" {
		l.members = slices.DeleteFunc(l.members, func(o *member) bool { return o.join.Serve == j.Serve })
	}
	l.members = append(l.members, m)
	l.relayout()
	return m
}

// remove drops m (if it is still a member) and lays the others out again.
func (l *Layout) remove(m *member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.members = slices.DeleteFunc(l.members, func(o *member) bool { return o == m })
	l.relayout()
}

// Routes returns each member's node name and route, in join order (for /status and tests).
func (l *Layout) Routes() [][2]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][2]any, len(l.members))
	for i, m := range l.members {
		out[i] = [2]any{m.join.Node, slices.Clone(m.route)}
	}
	return out
}

// relayout assigns every member its route (under mu) and queues the changed ones.
func (l *Layout) relayout() {
	var relays, leaves []*member
	for _, m := range l.members {
		if m.join.Serve != "" {
			relays = append(relays, m)
		} else {
			leaves = append(leaves, m)
		}
	}
	k := max(l.Fanout, 1)
	// Relay i's parent is relay (i-1)/k, relay 0's the sender: a k-ary tree in join order.
	ancestors := func(i int) []string {
		var up []string
		for i > 0 {
			i = (i - 1) / k
			up = append(up, relays[i].join.Serve)
		}
		return up
	}
	for i, m := range relays {
		l.assign(m, ancestors(i))
	}
	for i, m := range leaves {
		var route []string
		if n := len(relays); n > 0 {
			j := n - 1 - i%n // the last relays first: their uplinks feed no relay
			route = append([]string{relays[j].join.Serve}, ancestors(j)...)
		}
		l.assign(m, route)
	}
}

// assign gives m route, queueing it for m's connection when it changed.
func (l *Layout) assign(m *member, route []string) {
	if m.route != nil && slices.Equal(m.route, route) {
		return
	}
	if route == nil {
		route = []string{}
	}
	m.route = route
	select { // replace a route not yet sent
	case <-m.routes:
	default:
	}
	m.routes <- slices.Clone(route)
}

// member serves a receiver that joined: its route at once and at each change, beats between.
// The receiver leaves the layout when its connection ends or is silent for Silence (its host
// killed, or cut off: it cannot say so itself).
func (c *conn) member(payload []byte) {
	var j wire.Join
	if err := wire.Unmarshal(wire.KindJoin, wire.KindJoin, payload, &j); err != nil {
		c.fail(wire.CodeBadRequest, err.Error())
		return
	}
	if c.s.Layout == nil {
		c.fail(wire.CodeBadRequest, "this is a relay, not a sender: join the sender")
		return
	}
	m := c.s.Layout.add(j)
	defer c.s.Layout.remove(m)
	c.s.logf("weights: %s joined from %s (re-serving on %q)", j.Node, c.RemoteAddr(), j.Serve)
	lost := make(chan error, 1)
	go func() {
		var buf []byte
		for {
			c.SetReadDeadline(time.Now().Add(c.s.Silence))
			var err error
			if _, _, buf, err = wire.ReadFrame(c.br, buf); err != nil {
				lost <- err
				return
			}
		}
	}()
	tick := time.NewTicker(wire.BeatEvery)
	defer tick.Stop()
	for {
		frame := beat
		select {
		case route := <-m.routes:
			frame = wire.AppendFrame(nil, wire.KindRoute, wire.Marshal(wire.Route{Upstreams: route}))
		case <-tick.C:
		case err := <-lost:
			c.s.logf("weights: %s (%s) left the layout: %v", j.Node, c.RemoteAddr(), err)
			return
		}
		if err := c.write(frame); err != nil {
			c.s.logf("weights: %s (%s) left the layout: %v", j.Node, c.RemoteAddr(), err)
			return
		}
	}
}
