package receiver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"needle/internal/prom"
	"needle/internal/writer"
	"needle/safetensors/synth"
	"needle/weights/feed"
	"needle/weights/sender"
	"needle/weights/wire"
)

// TestMain runs a receiver as a child process (a process the tests can SIGKILL) when asked.
func TestMain(m *testing.M) {
	if out := os.Getenv("NEEDLE_WEIGHTS_CHILD_OUT"); out != "" {
		r, err := Open(Options{Upstreams: []string{os.Getenv("NEEDLE_WEIGHTS_CHILD_FROM")}, Out: out, Threads: 2,
			Retry: 20 * time.Millisecond, Log: log.New(os.Stderr, "", log.Lmicroseconds), Ready: func(_ string, v uint64) { fmt.Printf("ready %d\n", v) }})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		r.Run(context.Background())
		return
	}
	os.Exit(m.Run())
}

// bigModel is ~1 MB in 4 KiB chunks: a full step is hundreds of records.
var bigModel = []synth.Tensor{synth.T("embed", "BF16", 2000, 256), synth.T("norm", "F32", 256)}

// child is a receiver process; its ready versions arrive on ready.
type child struct {
	cmd   *exec.Cmd
	ready chan uint64
}

func startChild(t *testing.T, out, from string) *child {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NEEDLE_WEIGHTS_CHILD_OUT="+out, "NEEDLE_WEIGHTS_CHILD_FROM="+from)
	cmd.Stderr = tWriter{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, ready: make(chan uint64, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var v uint64
			if _, err := fmt.Sscanf(sc.Text(), "ready %d", &v); err == nil {
				c.ready <- v
			}
		}
		close(c.ready)
	}()
	t.Cleanup(c.kill)
	return c
}

func (c *child) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

func (c *child) waitFor(t *testing.T, v uint64) {
	t.Helper()
	for got := range c.ready {
		if got == v {
			return
		}
	}
	t.Fatalf("the receiver process ended before version %d", v)
}

// whole checks that out is absent or byte-identical to one of versions (never a mix).
func whole(t *testing.T, out string, versions [][]byte) {
	t.Helper()
	got, err := os.ReadFile(out)
	if os.IsNotExist(err) {
		return
	}
	for _, v := range versions {
		if bytes.Equal(got, v) {
			return
		}
	}
	t.Fatalf("%s (%d bytes, err %v) is none of the %d published versions", out, len(got), err, len(versions))
}

// TestKilledAndRestarted: a receiver process killed (SIGKILL) in the middle of a full step, of
// a delta step (records are applied as they arrive: mid-apply too) and right after a version,
// restarted each time; the file is always absent or a whole version, and ends as the newest.
func TestKilledAndRestarted(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	out := filepath.Join(dir, "r", "model.safetensors")
	os.MkdirAll(filepath.Dir(out), 0o755)
	img, _ := synth.Image(bigModel, 1)
	versions := [][]byte{img}
	publish := func() {
		if _, err := pub.PublishImage(versions[len(versions)-1], 0); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	// killAt stalls the stream at byte at and kills the receiver once its state file says
	// it works on the step (open): killed while the step is open.
	state := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".needle", "state.json")
	killAt := func(at int64, open func(state string) bool) {
		stalled := make(chan bool)
		px := newProxy(t, snd.addr, fault{at: at, kind: "stall", hit: func() { close(stalled) }})
		c := startChild(t, out, px.addr)
		<-stalled
		for b, _ := os.ReadFile(state); !open(string(b)); b, _ = os.ReadFile(state) {
			time.Sleep(time.Millisecond)
		}
		c.kill()
		whole(t, out, versions)
	}
	next := filepath.Join(filepath.Dir(state), "next")
	killAt(int64(len(img))/2, func(s string) bool { // in the middle of the full step, next allocated
		_, err := os.Stat(next)
		return strings.Contains(s, `"full"`) && err == nil
	})
	c := startChild(t, out, snd.addr)
	c.waitFor(t, 1)
	c.kill()
	whole(t, out, versions[:1])
	if got := snd.reg.Counter("needle_weights_transfers_total", "", "first", "full", "resumed", "true").Get(); got != 1 {
		t.Errorf("the restarted receiver did not resume its full step (%v resumed transfers)\n%s", got, text(snd.reg))
	}
	versions = append(versions, synth.Step(img, 0.01, 2))
	publish()
	if _, err := pub.Wait(2); err != nil {
		t.Fatal(err)
	}
	// the delta step 1 -> 2 (~37 KB, after a ~6 KB manifest) is half through (its spare became next)
	killAt(20000, func(s string) bool { return !strings.Contains(s, `"spare"`) })
	c = startChild(t, out, snd.addr)
	c.waitFor(t, 2)
	versions = append(versions, synth.Step(versions[2-1], 0.01, 3))
	publish()
	c.waitFor(t, 3)
	c.kill() // while it makes its spare copy or tells the engine
	whole(t, out, versions)
	versions = append(versions, synth.Step(versions[3-1], 0.01, 4))
	publish()
	c = startChild(t, out, snd.addr)
	c.waitFor(t, 4)
	whole(t, out, versions[3:])
}

// TestSenderRestarted: the sender closes and opens its folder again; receivers get the next
// version as a delta from the halves it kept.
func TestSenderRestarted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "send")
	open := func() (*sender.Sender, *sender.Publisher, net.Listener) {
		s, err := sender.Open(sender.Options{Dir: dir, Chunk: 4096, Keep: 4, Log: testLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctl, err := s.ListenControl()
		if err != nil {
			t.Fatal(err)
		}
		p, err := sender.Dial(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s, p, ctl
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, p, ctl := open()
	srv := serveAt(t, s, addr)
	r := startReceiver(t, filepath.Join(t.TempDir(), "model.safetensors"), false, addr)
	img, _ := synth.Image(bigModel, 5)
	p.PublishImage(img, 0)
	r.waitFor(t, 1)
	img2 := synth.Step(img, 0.01, 6)
	p.PublishImage(img2, 0)
	r.waitFor(t, 2)
	p.Close()
	ctl.Close()
	srv.Close()
	s.Close()
	s, p, ctl = open()
	defer func() { p.Close(); ctl.Close(); s.Close() }()
	srv = serveAt(t, s, addr)
	defer srv.Close()
	img3 := synth.Step(img2, 0.01, 7)
	if v, err := p.PublishImage(img3, 0); err != nil || v != 3 {
		t.Fatalf("publish after a restart: version %d, %v", v, err)
	}
	r.waitFor(t, 3)
	r.check(t, img3)
	if got := r.opt.Metrics.Counter("needle_weights_receiver_versions_total", "", "kind", "full").Get(); got != 1 {
		t.Errorf("%v full versions: want only the first (the restarted sender serves deltas)", got)
	}
}

// stoppedAtOne starts a sender, publishes version 1 (seeded), lets a receiver take it and
// stops the receiver: its file, and the image, are version 1.
func stoppedAtOne(t *testing.T, seed uint64) (node, *sender.Publisher, string, []byte) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	out := filepath.Join(dir, "r", "model.safetensors")
	img, _ := synth.Image(bigModel, seed)
	pub.PublishImage(img, 0)
	r := startReceiver(t, out, false, snd.addr)
	r.waitFor(t, 1)
	r.stop()
	return snd, pub, out, img
}

// TestSeveralBehind: a receiver stopped for 3 versions gets them as a chain of delta steps;
// stopped for more than the sender retains, it gets the newest in full.
func TestSeveralBehind(t *testing.T) {
	snd, pub, out, img := stoppedAtOne(t, 8)
	for v := uint64(2); v <= 4; v++ {
		img = synth.Step(img, 0.01, v)
		pub.PublishImage(img, 0)
		pub.Wait(v)
	}
	r := startReceiver(t, out, false, snd.addr)
	r.waitFor(t, 4)
	r.check(t, img)
	if full := r.opt.Metrics.Counter("needle_weights_received_bytes_total", "", "kind", "full").Get(); full != 0 {
		t.Errorf("3 versions behind: %v bytes came in full, want a delta chain", full)
	}
	r.stop()
	for v := uint64(5); v <= 10; v++ { // the sender keeps 4 steps: 4 -> 5 is gone
		img = synth.Step(img, 0.01, v)
		pub.PublishImage(img, 0)
		pub.Wait(v)
	}
	r = startReceiver(t, out, false, snd.addr)
	r.waitFor(t, 10)
	r.check(t, img)
	if full := r.opt.Metrics.Counter("needle_weights_received_bytes_total", "", "kind", "full").Get(); full < float64(len(img)) {
		t.Errorf("6 versions behind, 4 retained: %v bytes came in full, want the whole file", full)
	}
}

// TestCorruptAndTruncated: a flipped byte inside a delta record fails its frame check (the
// receiver discards the step and asks for the newest version in full), a connection cut in the
// middle of a frame resumes; the file ends as the newest version.
func TestCorruptAndTruncated(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	img, _ := synth.Image(bigModel, 11)
	pub.PublishImage(img, 0)
	next := synth.Step(img, 0.01, 12)
	// Version 1's full step is the file and ~1% of frame headers; the delta 1 -> 2 ~37 KB.
	px := newProxy(t, snd.addr, fault{at: int64(len(img)) + 20000, kind: "flip"}, fault{at: int64(len(img)) / 3, kind: "cut"})
	r := startReceiver(t, filepath.Join(dir, "r", "model.safetensors"), false, px.addr)
	r.waitFor(t, 1)
	pub.PublishImage(next, 0)
	r.waitFor(t, 2)
	r.check(t, next)
	m := r.opt.Metrics
	if m.Counter("needle_weights_receiver_errors_total", "", "cause", "check").Get() != 1 ||
		m.Counter("needle_weights_receiver_errors_total", "", "cause", "network").Get() < 1 {
		t.Errorf("want one check failure and a network one:\n%s", text(m))
	}
	if got := snd.reg.Counter("needle_weights_transfers_total", "", "first", "full", "resumed", "true").Get(); got != 1 {
		t.Errorf("the cut full step was not resumed (%v resumed full transfers)", got)
	}
}

// TestCorruptFullRecord: a flipped byte in a raw record of a full step, whose check runs on
// the goroutine that writes it (not on the reader), fails that check before the record is
// written: the step is discarded and taken again in full, and the file is the version.
func TestCorruptFullRecord(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	img, _ := synth.Image(bigModel, 16)
	pub.PublishImage(img, 0)
	px := newProxy(t, snd.addr, fault{at: int64(len(img)) / 2, kind: "flip"})
	r := startReceiver(t, filepath.Join(dir, "r", "model.safetensors"), false, px.addr)
	r.waitFor(t, 1)
	r.check(t, img)
	if got := r.opt.Metrics.Counter("needle_weights_receiver_errors_total", "", "cause", "check").Get(); got != 1 {
		t.Errorf("want one check failure, got %v:\n%s", got, text(r.opt.Metrics))
	}
}

func text(m *prom.Registry) string {
	var b strings.Builder
	m.WriteTo(&b)
	return b.String()
}

// TestBaseNotClaimed: a file that is not the version its state claims (one byte changed while
// the receiver was stopped) is found out against the manifest and replaced by a full pull.
func TestBaseNotClaimed(t *testing.T) {
	snd, pub, out, img := stoppedAtOne(t, 13)
	f, err := os.OpenFile(out, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0x5a}, int64(len(img))-100)
	f.Close()
	img = synth.Step(img, 0.01, 14)
	pub.PublishImage(img, 0)
	r := startReceiver(t, out, false, snd.addr)
	r.waitFor(t, 2)
	r.check(t, img)
	if got := r.opt.Metrics.Counter("needle_weights_receiver_errors_total", "", "cause", "base").Get(); got != 1 {
		t.Errorf("the damaged base was not reported (%v)", got)
	}
}

// TestDiskFull: the receiver's folder is a tmpfs of 2.5 files' room; a version that changes a
// tensor's dtype needs a third file (rebase) and fails with ENOSPC, the old version stays
// whole; once the tmpfs grows, the receiver gets the new version. Needs root (mount).
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs")
	}
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	img, _ := synth.Image(bigModel, 15)
	mnt := filepath.Join(dir, "mnt")
	os.MkdirAll(mnt, 0o755)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", len(img)*5/2)); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	var logs strings.Builder
	lw := &writer.Locked{W: io.MultiWriter(&logs, tWriter{t})}
	out := filepath.Join(mnt, "model.safetensors")
	pub.PublishImage(img, 0)
	r := startReceiver(t, out, false, snd.addr)
	r.opt.Log.SetOutput(lw)
	r.waitFor(t, 1)
	changed, _ := synth.Image([]synth.Tensor{bigModel[0], synth.T("norm", "BF16", 256)}, 16)
	pub.PublishImage(changed, 0)
	for r.opt.Metrics.Counter("needle_weights_receiver_errors_total", "", "cause", "disk").Get() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	r.check(t, img)
	lw.Lock()
	if !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("the log does not say the disk is full:\n%s", logs.String())
	}
	lw.Unlock()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_REMOUNT, fmt.Sprintf("size=%d", len(img)*4)); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, 2)
	r.check(t, changed)
}

// TestNeverAnswering: one client asks for the full version and never reads, another connects
// and says nothing; two receivers get every version meanwhile, and publishing never waits for
// the stuck client (its half is retired under it: the server drops it).
func TestNeverAnswering(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	big := []synth.Tensor{synth.T("embed", "BF16", 8192, 1024)} // 16 MiB: more than the socket buffers
	img, _ := synth.Image(big, 17)
	pub.PublishImage(img, 0)
	for _, hello := range [][]byte{wire.AppendFrame(nil, wire.KindHello, wire.Marshal(wire.Hello{Node: "stuck"})), nil} {
		c, err := net.Dial("tcp", snd.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4096)
		c.Write(hello)
	}
	rs := []*rcv{startReceiver(t, filepath.Join(dir, "a", "m.safetensors"), false, snd.addr),
		startReceiver(t, filepath.Join(dir, "b", "m.safetensors"), false, snd.addr)}
	for v := uint64(1); v <= 4; v++ {
		if v > 1 {
			img = synth.Step(img, 0.01, v)
			pub.PublishImage(img, 0)
		}
		for _, r := range rs {
			r.waitFor(t, v)
			r.check(t, img)
		}
	}
}

// serveAt serves s's store on addr (a restarted sender comes back on its address).
func serveAt(t *testing.T, s *sender.Sender, addr string) *feed.Feed {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := feed.New(s.Store, prom.NewRegistry())
	srv.Log = testLog(t)
	go srv.Serve(ln)
	return srv
}
