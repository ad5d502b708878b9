package receiver

import (
	"bytes"
	"context"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"needle/internal/prom"
	"needle/safetensors/synth"
	"needle/weights/feed"
	"needle/weights/sender"
	"needle/weights/store"
	"needle/weights/wire"
)

// testLog sends a component's log lines to the test's log.
func testLog(t *testing.T) *log.Logger { return log.New(tWriter{t}, "", log.Lmicroseconds) }

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimSpace(p)))
	return len(p), nil
}

// node is a sender or a re-serving receiver listening on loopback.
type node struct {
	addr string
	srv  *feed.Feed
	reg  *prom.Registry
}

// listen serves st on loopback, its feed set up by set (nil: as it comes).
func listen(t *testing.T, st *store.Store, set func(*feed.Feed)) node {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prom.NewRegistry()
	srv := feed.New(st, reg)
	srv.Log = testLog(t)
	if set != nil {
		set(srv)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Close)
	return node{addr: ln.Addr().String(), srv: srv, reg: reg}
}

func startSender(t *testing.T, dir string, f wire.Format) (*sender.Sender, node, *sender.Publisher) {
	return startSenderWith(t, dir, f, nil)
}

// startSenderWith is startSender whose feed (which has a layout) is a client of token.
func startSenderWith(t *testing.T, dir string, f wire.Format, token []byte) (*sender.Sender, node, *sender.Publisher) {
	s, err := sender.Open(sender.Options{Dir: dir, Format: f, Chunk: 4096, Keep: 4, Threads: 2, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.ListenControl()
	if err != nil {
		t.Fatal(err)
	}
	n := listen(t, s.Store, func(f *feed.Feed) { f.Layout, f.Token = &feed.Layout{}, token })
	p, err := sender.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); ln.Close(); s.Close() })
	return s, n, p
}

// rcv is an in-process receiver whose Ready calls arrive on ready.
type rcv struct {
	*Receiver
	out   string
	ready chan uint64
	node  node
	stop  func() // ends Run and closes the receiver (a clean stop; killed receivers: faults_test.go)
}

func startReceiver(t *testing.T, out string, reserve bool, upstreams ...string) *rcv {
	return startReceiverWith(t, out, reserve, func(*Options) {}, upstreams...)
}

// startReceiverWith is startReceiver with options set by set.
func startReceiverWith(t *testing.T, out string, reserve bool, set func(*Options), upstreams ...string) *rcv {
	r := &rcv{out: out, ready: make(chan uint64, 100)}
	opt := Options{Upstreams: upstreams, Out: out, Threads: 2, Log: testLog(t),
		Ready: func(_ string, v uint64) { r.ready <- v }}
	set(&opt)
	if reserve { // re-serving: a relay of the sender's layout when it joins one
		opt.Store = store.New(4, 1)
		r.node = listen(t, opt.Store, func(f *feed.Feed) { f.Token = opt.Token })
		opt.Serve = r.node.addr
	}
	os.MkdirAll(filepath.Dir(out), 0o755)
	rec, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	r.Receiver = rec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rec.Run(ctx); close(done) }()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done; rec.Close() }) }
	t.Cleanup(r.stop)
	return r
}

// waitFor reads ready until version v.
func (r *rcv) waitFor(t *testing.T, v uint64) {
	t.Helper()
	for got := range r.ready {
		if got == v {
			return
		}
		if got > v {
			t.Fatalf("%s jumped to version %d waiting for %d", r.out, got, v)
		}
	}
}

func (r *rcv) check(t *testing.T, want []byte) {
	t.Helper()
	got, err := os.ReadFile(r.out)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes (err %v), differs from the published %d bytes", r.out, len(got), err, len(want))
	}
}

var model = []synth.Tensor{
	synth.T("embed", "BF16", 500, 64),
	synth.T("norm", "F32", 64),
	synth.T("ids", "I64", 10),
	synth.T("w", "BF16", 128, 64),
}

// TestChain: the sender, a receiver pulling from it and re-serving, and a receiver pulling
// from that one, over loopback, through deltas and a dtype and shape change between versions
// (version 4: norm F32 -> BF16, a tensor added, one removed).
func TestChain(t *testing.T) {
	for _, f := range []wire.Format{wire.Packed, wire.AstraFlow} {
		t.Run(f.String(), func(t *testing.T) {
			dir := t.TempDir()
			_, snd, pub := startSender(t, filepath.Join(dir, "send"), f)
			r1 := startReceiver(t, filepath.Join(dir, "r1", "model.safetensors"), true, snd.addr)
			r2 := startReceiver(t, filepath.Join(dir, "r2", "model.safetensors"), false, r1.node.addr)
			img, _ := synth.Image(model, 1)
			changed := append([]synth.Tensor{synth.T("norm", "BF16", 64), synth.T("extra", "F32", 7)}, model[0], model[3])
			for v := uint64(1); v <= 6; v++ {
				switch v {
				case 1:
				case 4:
					img, _ = synth.Image(changed, 4)
				default:
					img = synth.Step(img, 0.01, v)
				}
				if got, err := pub.PublishImage(img, 0); err != nil || got != v {
					t.Fatalf("publish %d: %d %v", v, got, err)
				}
				for _, r := range []*rcv{r1, r2} {
					r.waitFor(t, v)
					r.check(t, img)
				}
			}
		})
	}
}

// TestTree: four receivers in a tree (sender -> r1 -> {r2, r3}, r2 -> r4) over loopback; the
// sender's uplink carries each version once (to r1): one full copy, then one delta per version.
// r3 checks every version whole against its manifest (VerifyEach).
func TestTree(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	r1 := startReceiver(t, filepath.Join(dir, "r1", "m.safetensors"), true, snd.addr)
	r2 := startReceiver(t, filepath.Join(dir, "r2", "m.safetensors"), true, r1.node.addr)
	r3 := startReceiverWith(t, filepath.Join(dir, "r3", "m.safetensors"), false, func(o *Options) { o.VerifyEach = true }, r1.node.addr)
	r4 := startReceiver(t, filepath.Join(dir, "r4", "m.safetensors"), false, r2.node.addr)
	img, _ := synth.Image(model, 21)
	var deltaBytes float64
	for v := uint64(1); v <= 5; v++ {
		if v > 1 {
			img = synth.Step(img, 0.01, 20+v)
		}
		pub.PublishImage(img, 0)
		st, err := pub.Wait(v)
		if err != nil {
			t.Fatal(err)
		}
		deltaBytes += float64(st.WireBytes)
		for _, r := range []*rcv{r1, r2, r3, r4} {
			r.waitFor(t, v)
			r.check(t, img)
		}
	}
	sent := func(kind string) float64 {
		return snd.reg.Counter("needle_weights_sent_bytes_total", "", "kind", kind).Get()
	}
	if full := sent("full"); full < float64(len(img)) || full > 1.05*float64(len(img)) {
		t.Errorf("the sender sent %v bytes in full, want one copy of the %d-byte file", full, len(img))
	}
	if got := r3.opt.Metrics.Counter("needle_weights_receiver_errors_total", "", "cause", "check").Get(); got != 0 {
		t.Errorf("r3 failed %v checks of whole versions", got)
	}
	if d := sent("delta"); d != deltaBytes {
		t.Errorf("the sender sent %v delta bytes, want each of its 4 steps once (%v)", d, deltaBytes)
	}
}

// heldNotifier counts, when the engine is told of a version, the receiver's open files that
// are an earlier version of Out (its name dropped by the rename: "(deleted)").
type heldNotifier struct {
	out  string
	held chan int
}

func (h heldNotifier) String() string { return "held files" }

func (h heldNotifier) Notify(_ context.Context, u Update) error {
	h.held <- deletedOpen(h.out)
	return nil
}

// deletedOpen is how many of this process's file descriptors are the file once named path.
func deletedOpen(path string) int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path+" (deleted)" {
			n++
		}
	}
	return n
}

// TestPreviousVersionHeldUntilTold: the file of the version Out held before is still open
// while the engine is told of the new one (its pages are not freed inside the rename, on the
// version's path), and closed right after: one such file at each notice, none once the
// receiver waits for the next version.
func TestPreviousVersionHeldUntilTold(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	out := filepath.Join(dir, "r", "model.safetensors")
	n := heldNotifier{out: out, held: make(chan int, 10)}
	r := startReceiverWith(t, out, false, func(o *Options) { o.Notifier = n }, snd.addr)
	img, _ := synth.Image(model, 1)
	for v := uint64(1); v <= 3; v++ {
		if v > 1 {
			img = synth.Step(img, 0.01, v)
		}
		if _, err := pub.PublishImage(img, 0); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, v)
		if held, want := <-n.held, min(int(v)-1, 1); held != want {
			t.Fatalf("version %d: %d earlier versions of %s open while the engine was told, want %d", v, held, out, want)
		}
		r.check(t, img)
	}
	r.stop()
	if held := deletedOpen(out); held != 0 {
		t.Fatalf("%d earlier versions of %s still open after the receiver stopped", held, out)
	}
}
