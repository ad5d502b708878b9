package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"needle/server/lifecycle"
	"needle/testkit/netcluster"
	"needle/testkit/testenv"
)

// The replicas test's setting: the rehearsal (2 replica hosts, a client host, links of
// 1 Gbit/s; ASearcher's client with 32 workers, Search-R1's 512-query POSTs) and its phases.
const (
	linkRate         = "1gbit"
	asearcherWorkers = 32
	searchR1Turn     = 512
	replicaPort      = 8000
	frontPort        = 8000
	// frontServerTimeout is the front's --server-timeout: above the slowest 512-query answer of
	// this shared 2-core machine, and the bound on how long a POST caught by the cut waits.
	frontServerTimeout = 15 * time.Second
	noFault            = 10 * time.Second
	cutFor             = 20 * time.Second
	// afterRestore outlasts the calls the cut stalled (TCP's next SYN after a 20 s cut comes at
	// most 31 s after the first) and ASearcher's kill goal, so that no call is slowed by both.
	afterRestore = 20 * time.Second
	killedFor    = 3 * time.Second // before the killed replica is started again
	afterRestart = 15 * time.Second
	// The goals (issue 48): a killed replica's file leaves the folder within 2 s, an unreachable
	// one's within 5 s; ASearcher's calls through a kill take at most its 10 s sleep plus one attempt.
	killedFileGoal      = 2 * time.Second
	unreachableFileGoal = 5 * time.Second
	asearcherKillGoal   = 12 * time.Second
)

// TestReplicasAcrossHosts is issue 48's rehearsal of retrieval across hosts as a test. Two
// hosts serve replicas (`needle serve --save-address-to` one folder: the local file system,
// which every namespace shares, as an NFS folder would be shared), a third runs the clients and
// the front (`needle front`: HAProxy). ASearcher's client (32 workers, through the folder) and
// Search-R1's call (512-query POSTs to the front's one URL) run without a pause through: no
// fault; replica A's link cut for 20 s and restored; A killed with SIGKILL and started again.
// The cut comes first: ASearcher's workers pick a replica when they start and again only after
// an exception, so after the kill none would hold A for the cut to stall. Checked: A's file
// leaves the folder within 5 s of the cut and 2 s of the kill, comes back after each, B's
// stays, and the folder is never empty; Search-R1's POSTs never fail; ASearcher's calls never
// raise, and those through the kill take at most 12 s. The longest ASearcher stall through the
// cut is logged with the times that bound it. NEEDLE_ASEARCHER_CLIENT and NEEDLE_SEARCHR1_CLIENT
// name the real clients' files to run instead of the restatements, and NEEDLE_CLIENTS_PYTHON
// an interpreter with their requirements (bench/replicas_real_clients.sh).
func TestReplicasAcrossHosts(t *testing.T) {
	cluster := netcluster.ForTest(t, netcluster.Options{Hosts: 3, Rate: linkRate})
	haproxy := testenv.HAProxy(t)
	fx := newFixture(t)
	hostA, hostB, clients := cluster.Hosts[0], cluster.Hosts[1], cluster.Hosts[2]
	via := hostClient(clients)
	addrDir := filepath.Join(t.TempDir(), "addresses")
	folder := watchFolder(t, addrDir)
	launch := func(h *netcluster.Host) *server {
		command := func(name string, args ...string) *exec.Cmd { return h.Command(context.Background(), name, args...) }
		// One encoder thread each: three hosts share this machine's 2 cores.
		return fx.launchWith(t, command, via, addrDir, replicaPort, "--host", h.IP, "--threads", "1")
	}
	a, b := launch(hostA), launch(hostB)
	a.waitReady(t)
	b.waitReady(t)
	frontURL := startFront(t, fx, clients, haproxy, addrDir)
	loops := startReplicaClients(t, clients, addrDir, frontURL, fx.queries)
	began := time.Now()
	t.Logf("replicas ready, front on %s, clients running", frontURL)
	time.Sleep(noFault)

	if err := hostA.Cut(); err != nil { // a command: on a loaded machine it may take seconds to run
		t.Fatal(err)
	}
	cut := time.Now()
	cutGone := folder.wait(t, a.addressFile, false, cut, unreachableFileGoal)
	t.Logf("A's link cut; its file left the folder after %v", cutGone)
	time.Sleep(cutFor - time.Since(cut))
	if err := hostA.Restore(); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	back := folder.wait(t, a.addressFile, true, restored, unreachableFileGoal)
	t.Logf("A's link restored after %v; its file back after %v", restored.Sub(cut), back)
	time.Sleep(afterRestore)

	killed := time.Now()
	a.cmd.Process.Kill()
	a.exited <- <-a.exited // for launchWith's cleanup
	killGone := folder.wait(t, a.addressFile, false, killed, killedFileGoal)
	t.Logf("A killed; its file left the folder after %v", killGone)
	time.Sleep(killedFor - time.Since(killed))
	a = launch(hostA)
	a.waitReady(t)
	t.Logf("A started again, ready %.1fs after the kill", time.Since(killed).Seconds())
	time.Sleep(afterRestart)
	got := calls(t, loops)
	folder.check(t, b.addressFile)
	if t.Failed() {
		t.Logf("A:\n%s\nB:\n%s", a.log, b.log)
	}

	asearcher, searchR1 := byClient(got, "asearcher"), byClient(got, "searchr1")
	failed := slices.DeleteFunc(slices.Concat(asearcher, searchR1), func(c call) bool { return c.err == "" })
	for i, c := range failed {
		if i == 5 {
			t.Errorf("... %d failed calls in all", len(failed))
			break
		}
		t.Errorf("%s call at %.1fs (cut at %.1fs, kill at %.1fs) failed: %s", c.client, c.start.Sub(began).Seconds(),
			cut.Sub(began).Seconds(), killed.Sub(began).Seconds(), c.err)
	}
	// The calls the kill can slow start at most 12 s before it (a slower one breaks the goal
	// whatever slowed it); those the cut stalled began before the restore, 20 s earlier.
	throughKill := startedAfter(asearcher, killed.Add(-asearcherKillGoal))
	if c := slowest(throughKill); c.took() > asearcherKillGoal {
		t.Errorf("an ASearcher call through the kill took %v (started %.1fs after the kill), want at most %v",
			c.took(), c.start.Sub(killed).Seconds(), asearcherKillGoal)
	}
	stall := slowest(during(asearcher, cut, restored))
	t.Logf("%d hosts on %s links, load: %d ASearcher workers through the folder, Search-R1 %d-query POSTs through the front;"+
		" %d ASearcher calls and %d POSTs, %d failed", len(cluster.Hosts), linkRate, asearcherWorkers, searchR1Turn, len(asearcher), len(searchR1), len(failed))
	t.Logf("no fault: slowest ASearcher call %v, slowest POST %v", slowest(endedBefore(asearcher, cut)).took(), slowest(endedBefore(searchR1, cut)).took())
	t.Logf("cut: A's file left the folder %v after the cut and was back %v after the restore; slowest POST %v (front's server timeout %v);"+
		" longest ASearcher stall %v: started %.1fs after the cut, answered %.1fs after the restore; %d ASearcher calls in flight during the cut took over 5 s",
		cutGone, back, slowest(during(searchR1, cut, restored)).took(), frontServerTimeout,
		stall.took(), stall.start.Sub(cut).Seconds(), stall.end.Sub(restored).Seconds(),
		len(slices.DeleteFunc(during(asearcher, cut, restored), func(c call) bool { return c.took() <= 5*time.Second })))
	t.Logf("kill: A's file left the folder %v after SIGKILL; slowest ASearcher call %v (of those started from 12 s before it), slowest POST %v",
		killGone, slowest(throughKill).took(), slowest(startedAfter(searchR1, killed.Add(-frontServerTimeout))).took())
}

// hostClient is an HTTP client whose connections start inside host h.
func hostClient(h *netcluster.Host) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) { return h.Dial(ctx, network, addr) }}}
}

// startFront runs `needle front` in host h on frontPort and returns its URL once it listens.
func startFront(t *testing.T, fx *fixture, h *netcluster.Host, haproxy, addrDir string) string {
	log := &syncBuffer{}
	cmd := h.Command(context.Background(), fx.bin, "front", "--address-dir", addrDir, "--listen", h.Addr(frontPort),
		"--server-timeout", frontServerTimeout.String(), "--haproxy", haproxy, "--config", filepath.Join(t.TempDir(), "haproxy.cfg"))
	cmd.Stderr = log
	cmd.WaitDelay = 10 * time.Second // HAProxy, its child, holds the log's pipe too
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // it stops HAProxy; else the cluster's end kills both
		cmd.Wait()
		if t.Failed() {
			t.Logf("needle front:\n%s", log)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := h.Dial(context.Background(), "tcp", h.Addr(frontPort)); err == nil {
			c.Close()
			return "http://" + h.Addr(frontPort)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the front does not listen after 30 s\n%s", log)
		}
	}
}

// folderLog is what ASearcher's client reads in the folder (its address files), polled every
// 2 ms from the start of the test: every change, with its time.
type folderLog struct {
	mu      sync.Mutex
	changes []folderState
}

type folderState struct {
	at    time.Time
	files []string // paths, sorted
}

func watchFolder(t *testing.T, dir string) *folderLog {
	f := &folderLog{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			files, _ := lifecycle.Addresses(dir)
			paths := make([]string, 0, len(files))
			for p := range files {
				paths = append(paths, p)
			}
			slices.Sort(paths)
			f.mu.Lock()
			if n := len(f.changes); n == 0 || !slices.Equal(f.changes[n-1].files, paths) {
				f.changes = append(f.changes, folderState{time.Now(), paths})
			}
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return f
}

// wait returns how long after since the folder first held (present) or lacked path, failing
// the test when that took more than goal (it waits three times as long for the figure).
func (f *folderLog) wait(t *testing.T, path string, present bool, since time.Time, goal time.Duration) time.Duration {
	t.Helper()
	for time.Since(since) < 3*goal {
		f.mu.Lock()
		for _, s := range f.changes {
			if !s.at.Before(since) && slices.Contains(s.files, path) == present {
				f.mu.Unlock()
				took := s.at.Sub(since)
				if took > goal {
					t.Errorf("%s present=%v after %v, want within %v", path, present, took, goal)
				}
				return took
			}
		}
		f.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s not present=%v %v after: %+v", path, present, 3*goal, f.changes)
	return 0
}

// check fails the test if the folder was ever empty after its first file, or lost keep.
func (f *folderLog) check(t *testing.T, keep string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := false
	for i, s := range f.changes {
		if len(s.files) == 0 && i > 0 {
			t.Errorf("the address folder was empty at %v", s.at)
		}
		if has := slices.Contains(s.files, keep); kept && !has {
			t.Errorf("%s left the folder at %v: its replica served all along", keep, s.at)
		} else {
			kept = kept || has
		}
	}
}

// call is one call of a client: when it started and ended, and what it raised ("" for none).
type call struct {
	client     string
	start, end time.Time
	err        string
}

func (c call) took() time.Duration { return c.end.Sub(c.start) }

func byClient(calls []call, client string) []call {
	return slices.DeleteFunc(slices.Clone(calls), func(c call) bool { return c.client != client })
}

func startedAfter(calls []call, t time.Time) []call {
	return slices.DeleteFunc(slices.Clone(calls), func(c call) bool { return c.start.Before(t) })
}

func endedBefore(calls []call, t time.Time) []call {
	return slices.DeleteFunc(slices.Clone(calls), func(c call) bool { return !c.end.Before(t) })
}

// during lists the calls in flight at some moment between from and to.
func during(calls []call, from, to time.Time) []call {
	return slices.DeleteFunc(slices.Clone(calls), func(c call) bool { return !c.start.Before(to) || !c.end.After(from) })
}

// slowest is the call that took longest (a zero call if there is none).
func slowest(calls []call) call {
	var s call
	for _, c := range calls {
		if c.took() > s.took() {
			s = c
		}
	}
	return s
}

// startReplicaClients starts e2e/clients/replicas.py in host h.
func startReplicaClients(t *testing.T, h *netcluster.Host, addrDir, frontURL string, queries []string) *script {
	stopFile := filepath.Join(t.TempDir(), "stop")
	args := []string{"clients/replicas.py", addrDir, frontURL, writeJSON(t, queries), stopFile, fmt.Sprint(asearcherWorkers), fmt.Sprint(searchR1Turn)}
	if f := os.Getenv("NEEDLE_ASEARCHER_CLIENT"); f != "" {
		args = append(args, "--asearcher", f)
	}
	if f := os.Getenv("NEEDLE_SEARCHR1_CLIENT"); f != "" {
		args = append(args, "--searchr1", f)
	}
	py := os.Getenv("NEEDLE_CLIENTS_PYTHON") // one with the real clients' requirements
	if py == "" {
		py = testenv.Python(t)
	}
	return startScript(t, h.Command(context.Background(), py, args...), stopFile)
}

// calls stops replicas.py after its calls in flight and returns every call.
func calls(t *testing.T, s *script) []call {
	var out struct{ Calls [][4]any }
	s.stop(t, &out)
	seconds := func(v any) time.Time {
		f, _ := v.(float64)
		return time.Unix(0, int64(f*1e9))
	}
	calls := make([]call, len(out.Calls))
	for i, c := range out.Calls {
		err, _ := c[3].(string)
		calls[i] = call{client: fmt.Sprint(c[0]), start: seconds(c[1]), end: seconds(c[2]), err: err}
	}
	return calls
}
