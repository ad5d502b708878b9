package receiver

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"needle/weights/wire"
)

// route is where the receiver pulls from: the route its sender gave it (re-serving receivers
// of the sender's layout, nearest first) ahead of its own upstreams (Options.Upstreams, the
// sender among them), which are also the fallback while no route is known.
type route struct {
	static []string

	mu      sync.Mutex
	routed  []string
	gen     int       // bumped at each new route
	cur     *upstream // the connection Run uses, nil between connections
	waiting bool      // cur waits for a plan: no step is in flight on it
}

// list returns the upstreams in order of preference and the route's generation.
func (rt *route) list() ([]string, int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := slices.Clone(rt.routed)
	for _, a := range rt.static {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, rt.gen
}

// set takes a new route from the sender. The connection in use is closed when it is not to
// the new first upstream and either waits for a plan (nothing is lost) or is to an upstream
// the route dropped (left the layout: lost); otherwise the step in flight finishes first.
func (rt *route) set(routed []string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if slices.Equal(routed, rt.routed) {
		return
	}
	rt.routed = routed
	rt.gen++
	if rt.cur == nil {
		return
	}
	first := rt.static[0]
	if len(routed) > 0 {
		first = routed[0]
	}
	dropped := !slices.Contains(routed, rt.cur.addr) && !slices.Contains(rt.static, rt.cur.addr)
	if rt.cur.addr != first && (rt.waiting || dropped) {
		rt.cur.close()
	}
}

// use records the connection Run uses now (nil: none) and whether it waits for a plan, and
// returns the route's generation: a route that came since Run chose up is not acted on by set.
func (rt *route) use(up *upstream, waiting bool) int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.cur, rt.waiting = up, waiting
	return rt.gen
}

// join keeps this receiver a member of its sender's layout until ctx ends: it joins the
// first of Options.Upstreams that is a sender (a relay refuses), beats, and takes each route
// the sender sends. Without a sender among them (a layout written by hand with --from), the
// upstreams are used as given.
func (r *Receiver) join(ctx context.Context) {
	var last string // the last failure logged, so that a lasting one is logged once
	for ctx.Err() == nil {
		refused := 0
		for _, addr := range r.rt.static {
			err := r.joinOnce(ctx, addr)
			if ctx.Err() != nil {
				return
			}
			if serverSaid(err, wire.CodeBadRequest) {
				refused++
			}
			if msg := fmt.Sprintf("%s: %v", addr, err); msg != last {
				r.logf("needle weights recv: joining the layout of %s", msg)
				last = msg
			}
		}
		pause := 2 * wire.BeatEvery
		if refused == len(r.rt.static) { // no sender among them: they are the layout
			pause = 10 * time.Second
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
	}
}

// joinOnce is one membership connection to addr, until it breaks.
func (r *Receiver) joinOnce(ctx context.Context, addr string) error {
	up, err := dial(ctx, addr, r.opt.Token, r.opt.Silence)
	if err != nil {
		return err
	}
	defer up.close()
	stop := context.AfterFunc(ctx, up.close)
	defer stop()
	j := wire.Join{Node: r.opt.Node, Serve: r.opt.Serve}
	if host, port, err := net.SplitHostPort(j.Serve); err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
		// Listening on every address: others reach it at the one this host reaches its sender from.
		if local, ok := up.nc.LocalAddr().(*net.TCPAddr); ok {
			j.Serve = net.JoinHostPort(local.IP.String(), port)
		}
	}
	if err := wire.WriteFrame(up.nc, wire.KindJoin, wire.Marshal(j)); err != nil {
		return err
	}
	beats := make(chan struct{})
	defer close(beats)
	go func() {
		t := time.NewTicker(wire.BeatEvery)
		defer t.Stop()
		frame := wire.AppendFrame(nil, wire.KindBeat, nil)
		for {
			select {
			case <-t.C:
				up.nc.SetWriteDeadline(time.Now().Add(r.opt.Silence))
				if _, err := up.nc.Write(frame); err != nil {
					up.close()
					return
				}
			case <-beats:
				return
			}
		}
	}()
	var buf []byte
	for first := true; ; first = false {
		k, p, nbuf, err := up.next(buf)
		buf = nbuf
		if err != nil {
			return err
		}
		var rt wire.Route
		if err := wire.Unmarshal(k, wire.KindRoute, p, &rt); err != nil {
			return err
		}
		if first || !slices.Equal(rt.Upstreams, r.routed()) {
			r.logf("needle weights recv: the layout of %s routes this host through %v, then %v", addr, rt.Upstreams, r.rt.static)
		}
		r.rt.set(rt.Upstreams)
	}
}

// routed is the current route from the sender.
func (r *Receiver) routed() []string {
	r.rt.mu.Lock()
	defer r.rt.mu.Unlock()
	return r.rt.routed
}
