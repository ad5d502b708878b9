package lifecycle

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"needle/internal/writer"
)

// The tests watch at 50 ms: probes time out after 200 ms, a peer is unheard after 500 ms.
const testInterval = 50 * time.Millisecond

// replica writes the address file of addr into dir, as a needle serving there would.
func replica(t *testing.T, dir, addr string) *addressFile {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	a, _, err := writeAddress(dir, addr, host, p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// serving is a peer that answers GET /health, until closed (as a killed process's kernel
// closes its sockets).
func serving(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) }))
	t.Cleanup(s.Close)
	return s
}

// unreachable is a peer whose kernel accepts connections but that never answers: what a
// probe meets across a cut link (there the connect times out too).
func unreachable(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// refusing is an address where nothing listens: its host refuses connections.
func refusing(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return ln.Addr().String()
}

// watch starts a watcher of own's folder, stopped when the test ends; log returns its lines.
func watch(t *testing.T, own *addressFile, witness string) (w *watcher, log func() string) {
	var b strings.Builder
	out := &writer.Locked{W: &b}
	w = watchPeers(own, testInterval, witness, func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) })
	t.Cleanup(w.close)
	return w, func() string {
		out.Lock()
		defer out.Unlock()
		return b.String()
	}
}

// waitFor polls cond every millisecond up to limit and returns how long it took, or fails.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	began := time.Now()
	for !cond() {
		if time.Since(began) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(began)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// A killed peer's file leaves the folder within milliseconds: the peer's kernel closes the
// watch's idle connection and refuses the next one.
func TestWatchRemovesAKilledPeersFile(t *testing.T) {
	dir := t.TempDir()
	own := replica(t, dir, "127.0.0.1:1")
	peer := serving(t)
	other := replica(t, dir, peer.Listener.Addr().String())
	watch(t, own, "")
	time.Sleep(5 * testInterval) // the watch connection is open and idle
	peer.Close()
	took := waitFor(t, 2*time.Second, "the killed peer's file removed", func() bool { return !exists(other.path) })
	t.Logf("a killed peer's file left the folder %v after its sockets closed (watch interval %v)", took, testInterval)
	if !exists(own.path) {
		t.Fatal("the watcher's own file is gone")
	}
}

// An unreachable peer's file is removed by a replica with evidence that it is not the cut-off
// side (the witness answers, here by refusing; or a majority of the folder answers), and kept
// by one without (2 replicas, no witness: it may be the cut-off one).
func TestWatchRemovesAnUnreachablePeerOnlyWithEvidence(t *testing.T) {
	silence := timingFor(testInterval).silence
	t.Run("NoEvidence", func(t *testing.T) {
		dir := t.TempDir()
		own := replica(t, dir, "127.0.0.1:1")
		other := replica(t, dir, unreachable(t))
		watch(t, own, "")
		time.Sleep(3 * silence)
		if !exists(other.path) {
			t.Fatal("an unreachable peer's file was removed by one of 2 replicas without a witness")
		}
	})
	t.Run("Witness", func(t *testing.T) {
		dir := t.TempDir()
		own := replica(t, dir, "127.0.0.1:1")
		other := replica(t, dir, unreachable(t))
		_, log := watch(t, own, refusing(t))
		took := waitFor(t, 3*silence, "the unreachable peer's file removed", func() bool { return !exists(other.path) })
		if took < silence {
			t.Errorf("removed after %v, before the silence of %v", took, silence)
		}
		waitFor(t, time.Second, "a log line naming the witness", func() bool { return strings.Contains(log(), "reaches the witness") })
	})
	t.Run("Majority", func(t *testing.T) {
		dir := t.TempDir()
		own := replica(t, dir, "127.0.0.1:1")
		replica(t, dir, serving(t).Listener.Addr().String())
		other := replica(t, dir, unreachable(t))
		_, log := watch(t, own, "")
		waitFor(t, 3*silence, "the unreachable peer's file removed", func() bool { return !exists(other.path) })
		waitFor(t, time.Second, "a log line naming the majority", func() bool { return strings.Contains(log(), "hears 2 of the folder's 3 replicas") })
	})
}

// A replica whose file was removed writes it again once it hears a majority of the folder's
// replicas (a healed partition), and not before: the witness is not enough.
func TestWatchRewritesItsOwnFile(t *testing.T) {
	dir := t.TempDir()
	own := replica(t, dir, "127.0.0.1:1")
	cut := replica(t, dir, unreachable(t))
	_, log := watch(t, own, refusing(t))
	os.Remove(own.path)
	time.Sleep(3 * timingFor(testInterval).silence)
	if exists(own.path) {
		t.Fatal("own file written again while 1 of the folder's 2 replicas answers")
	}
	replica(t, dir, serving(t).Listener.Addr().String()) // a peer it hears
	os.Remove(cut.path)
	waitFor(t, 3*timingFor(testInterval).silence, "own file written again", func() bool { return exists(own.path) })
	waitFor(t, time.Second, "a log line", func() bool {
		return strings.Contains(log(), "wrote "+own.path+" again: it was removed, and this replica hears 2 of the folder's")
	})
}

// Two replicas that each reach the witness but not each other (an asymmetric partition) remove
// each other's files: the folder's lock keeps one at every moment.
func TestWatchNeverEmptiesTheFolder(t *testing.T) {
	dir := t.TempDir()
	a := replica(t, dir, unreachable(t))
	b := replica(t, dir, unreachable(t))
	witness := refusing(t)
	watch(t, a, witness)
	watch(t, b, witness)
	for end := time.Now().Add(4 * timingFor(testInterval).silence); time.Now().Before(end); {
		files, err := Addresses(dir)
		if err != nil || len(files) == 0 {
			t.Fatalf("the folder is empty (%v)", err)
		}
	}
	if files, _ := Addresses(dir); len(files) != 1 {
		t.Fatalf("the folder holds %v, want one of the two files", files)
	}
}
