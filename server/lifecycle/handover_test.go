package lifecycle

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// startHandover is a serving needle's side on a fresh loopback port: its listener and the
// handover answering for it.
func startHandover(t *testing.T) (*net.TCPAddr, *handover) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := listenControl(ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); ctl.Close() })
	return ln.Addr().(*net.TCPAddr), serveHandover(ln, ctl, t.Logf)
}

// take is takeOver that must succeed; the replacement's sockets close with the test.
func take(t *testing.T, addr *net.TCPAddr) *takeover {
	t.Helper()
	r, err := takeOver(addr)
	if err != nil || r == nil {
		t.Fatalf("takeOver(%s) = %v, %v", addr, r, err)
	}
	t.Cleanup(func() { r.tcp.Close(); r.ctl.Close(); r.conn.Close() })
	return r
}

// The handover in one process, both sides: refused while loading and while another
// replacement loads; the replacement gets the same listening socket (a connection made to
// the port is accepted on its copy), "ready" makes the old side let go, and the replacement
// then answers the next replacement itself.
func TestHandoverPassesTheSocket(t *testing.T) {
	addr, old := startHandover(t)
	if _, err := takeOver(addr); err == nil || !strings.Contains(err.Error(), "still loading") {
		t.Fatalf("replacing a loading server: %v, want refused", err)
	}
	old.ready.Store(true)
	r := take(t, addr)
	if r.pid != os.Getpid() {
		t.Errorf("handed over by pid %d, want %d", r.pid, os.Getpid())
	}
	if _, err := takeOver(addr); err == nil || !strings.Contains(err.Error(), "being replaced") {
		t.Errorf("a second replacement during the first: %v, want refused", err)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r.tcp.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := r.tcp.Accept()
	if err != nil {
		t.Fatalf("the handed listener did not get a connection made to %s: %v", addr, err)
	}
	got.Close()

	if err := r.ready(); err != nil {
		t.Fatal(err)
	}
	select {
	case pid := <-old.replaced:
		if pid != os.Getpid() {
			t.Errorf("replaced by pid %d", pid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old side never heard ready")
	}
	next := serveHandover(r.tcp, r.ctl, t.Logf) // as runServe does once ready
	next.ready.Store(true)
	take(t, addr)
}

// A replacement that goes away before it is ready leaves the old side serving and open to
// the next one; with no needle on a port, takeOver finds none.
func TestHandoverReplacementLeaves(t *testing.T) {
	addr, old := startHandover(t)
	old.ready.Store(true)
	r := take(t, addr)
	r.conn.Close()
	for deadline := time.Now().Add(10 * time.Second); old.busy.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the old side still counts the replacement that left")
		}
	}
	take(t, addr)
	select {
	case pid := <-old.replaced:
		t.Fatalf("replaced by pid %d that never said ready", pid)
	default:
	}

	free, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	free.Close()
	if r, err := takeOver(free.Addr().(*net.TCPAddr)); r != nil || err != nil {
		t.Errorf("takeOver with no needle on the port: %v, %v; want nil, nil", r, err)
	}
}
