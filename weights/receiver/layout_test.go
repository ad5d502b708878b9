package receiver

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"needle/internal/prom"
	"needle/safetensors/synth"
	"needle/weights/wire"
)

// waitUntil polls cond every 10 ms until it holds, failing t after 30 s with what.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func counter(reg *prom.Registry, name string, labels ...string) float64 {
	return reg.Counter(name, "", labels...).Get()
}

// TestLayoutChain: re-serving receivers that name only the sender are laid out by it in a
// chain in the order they joined; a full version and deltas cross every link once (the
// sender's uplink carries one copy, so does each relay's but the last one's).
func TestLayoutChain(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	var rs []*rcv
	for i := range 4 {
		rs = append(rs, startReceiver(t, filepath.Join(dir, "r"+string(rune('1'+i)), "m.safetensors"), true, snd.addr))
		waitUntil(t, "the join", func() bool { return len(snd.srv.Layout.Routes()) == i+1 })
	}
	for i, r := range rs {
		want := []string{}
		for j := i - 1; j >= 0; j-- {
			want = append(want, rs[j].node.addr)
		}
		waitUntil(t, "the route", func() bool { return slices.Equal(r.routed(), want) })
	}
	img, _ := synth.Image(bigModel, 31)
	for v := uint64(1); v <= 3; v++ {
		if v > 1 {
			img = synth.Step(img, 0.01, 30+v)
		}
		pub.PublishImage(img, 0)
		for _, r := range rs {
			r.waitFor(t, v)
			r.check(t, img)
		}
	}
	for i, reg := range []*prom.Registry{snd.reg, rs[0].node.reg, rs[1].node.reg, rs[2].node.reg, rs[3].node.reg} {
		full := counter(reg, "needle_weights_sent_bytes_total", "kind", "full")
		if want := float64(len(img)); i < 4 && (full < want || full > 1.05*want) || i == 4 && full != 0 {
			t.Errorf("node %d (0: the sender) sent %v bytes in full, want one copy of %v (none from the last)", i, full, want)
		}
	}
}

// TestRelayForwardsWhileArriving: a relay whose upstream stalls halfway through a full version
// has already forwarded what it got to the host below it (records go on as they land, not once
// the version is whole); the relay notices the silence, resumes from the sender, and both end
// on the version.
func TestRelayForwardsWhileArriving(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	img, _ := synth.Image(bigModel, 41)
	stalled := make(chan struct{})
	px := newProxy(t, snd.addr, fault{at: int64(len(img)) / 2, kind: "stall", hit: func() { close(stalled) }})
	fast := func(o *Options) { o.Silence = 300 * time.Millisecond }
	r1 := startReceiverWith(t, filepath.Join(dir, "r1", "m.safetensors"), true, fast, px.addr, snd.addr)
	waitUntil(t, "r1's join", func() bool { return len(snd.srv.Layout.Routes()) == 1 })
	r2 := startReceiverWith(t, filepath.Join(dir, "r2", "m.safetensors"), true, fast, snd.addr)
	waitUntil(t, "r2's route through r1", func() bool { return slices.Equal(r2.routed(), []string{r1.node.addr}) })
	pub.PublishImage(img, 0)
	<-stalled
	waitUntil(t, "records at r2 before r1 holds the version", func() bool {
		return counter(r2.opt.Metrics, "needle_weights_received_bytes_total", "kind", "full") > 0
	})
	r1.waitFor(t, 1)
	r2.waitFor(t, 1)
	r1.check(t, img)
	r2.check(t, img)
	if got := counter(snd.reg, "needle_weights_transfers_total", "first", "full", "resumed", "true"); got != 1 {
		t.Errorf("r1 did not resume its full step from the sender after the silence (%v resumed transfers)", got)
	}
}

// TestRouteAroundLostRelay: the middle relay of a chain stops during a version; the host below
// it goes on from the relay above (its route's next upstream) and the sender's layout drops
// the lost one.
func TestRouteAroundLostRelay(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	var rs []*rcv
	for i := range 3 {
		rs = append(rs, startReceiver(t, filepath.Join(dir, "r"+string(rune('1'+i)), "m.safetensors"), true, snd.addr))
		waitUntil(t, "the join", func() bool { return len(snd.srv.Layout.Routes()) == i+1 })
	}
	waitUntil(t, "the chain", func() bool { return len(rs[2].routed()) == 2 })
	img, _ := synth.Image(bigModel, 51)
	pub.PublishImage(img, 0)
	waitUntil(t, "records at the last host", func() bool {
		return counter(rs[2].opt.Metrics, "needle_weights_received_bytes_total", "kind", "full") > 0
	})
	rs[1].stop()
	rs[1].node.srv.Close()
	rs[0].waitFor(t, 1)
	rs[2].waitFor(t, 1)
	rs[2].check(t, img)
	waitUntil(t, "the route around the lost relay", func() bool { return slices.Equal(rs[2].routed(), []string{rs[0].node.addr}) })
}

// TestToken: with a token, the sender, a relay and a receiver behind it move versions as
// without; a receiver with no token or another one gets no byte of a version from the sender
// or the relay; a receiver with the token pulls nothing from an impostor without it (which
// could feed it any bytes). Each refusal is a clear error and a counter on both sides.
func TestToken(t *testing.T) {
	dir := t.TempDir()
	token := []byte("s3cret")
	_, snd, pub := startSenderWith(t, filepath.Join(dir, "send"), wire.Packed, token)
	withToken := func(tok []byte) func(*Options) { return func(o *Options) { o.Token = tok } }
	r1 := startReceiverWith(t, filepath.Join(dir, "r1", "m.safetensors"), true, withToken(token), snd.addr)
	r2 := startReceiverWith(t, filepath.Join(dir, "r2", "m.safetensors"), false, withToken(token), r1.node.addr)
	none := startReceiverWith(t, filepath.Join(dir, "none", "m.safetensors"), false, withToken(nil), snd.addr, r1.node.addr)
	wrong := startReceiverWith(t, filepath.Join(dir, "wrong", "m.safetensors"), false, withToken([]byte("guess")), snd.addr, r1.node.addr)
	_, impostor, ipub := startSender(t, filepath.Join(dir, "impostor"), wire.Packed)
	fed := startReceiverWith(t, filepath.Join(dir, "fed", "m.safetensors"), false, withToken(token), impostor.addr)

	img, _ := synth.Image(bigModel, 61)
	pub.PublishImage(img, 0)
	ipub.PublishImage(synth.Step(img, 0.5, 62), 0)
	r1.waitFor(t, 1)
	r2.waitFor(t, 1)
	r1.check(t, img)
	r2.check(t, img)
	auth := func(reg *prom.Registry) float64 {
		return counter(reg, "needle_weights_receiver_errors_total", "cause", "auth")
	}
	for name, r := range map[string]*rcv{"no token": none, "another token": wrong, "an impostor's upstream": fed} {
		waitUntil(t, name+"'s refusal", func() bool { return auth(r.opt.Metrics) >= 2 })
		if got := counter(r.opt.Metrics, "needle_weights_received_bytes_total", "kind", "full"); got != 0 {
			t.Errorf("a receiver with %s received %v bytes of a version", name, got)
		}
		if _, v := r.Version(); v != 0 {
			t.Errorf("a receiver with %s holds version %d", name, v)
		}
	}
	for name, reg := range map[string]*prom.Registry{"sender": snd.reg, "relay": r1.node.reg, "impostor": impostor.reg} {
		if got := counter(reg, "needle_weights_transfer_errors_total", "cause", "auth"); got < 1 {
			t.Errorf("the %s counted %v refused handshakes", name, got)
		}
	}
}
