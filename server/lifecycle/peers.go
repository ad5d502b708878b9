package lifecycle

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Replicas watch each other through the address folder. A killed process cannot withdraw its
// file and a cut-off one cannot know it is cut off, so every needle serve that writes into the
// folder (Options.WatchInterval > 0) probes the others' addresses (probe.go) and takes out the
// files of those that are gone:
//   - dead: the peer's host refuses the connection (nothing listens: the process was killed).
//     Its file goes at once: the refusal is the answer of its host, so this replica is not
//     cut off from it. Each peer is watched over an idle keep-alive connection that its kernel
//     closes when the process dies, so a kill is seen within milliseconds;
//   - unreachable: no answer (GET /health or the connect times out, the host is unreachable)
//     for the timing's silence. Both sides of a partition see this, so only a replica with
//     evidence that it is not the cut-off side removes the file: a majority of the folder's
//     replicas (itself included) answered within the silence, or the witness answers a TCP
//     connect (accepting or refusing it; by default the default route's gateway). The cut-off
//     side has neither and removes nothing. With 2 replicas and no witness neither side has a
//     majority: an unreachable peer's file stays (a killed one's still goes).
// A replica never removes its own file, never removes the folder's last file (decided under
// the folder's lock, as withdraw decides), and writes its own file again when it finds it
// missing while it hears a majority of the folder's replicas (a healed partition, or a peer
// that took it for gone while it was stopped).

// watcher is the watch of one replica over its folder; its loop alone touches the files.
type watcher struct {
	own     *addressFile
	timing  watchTiming
	witness string // host:port; "" for none
	log     func(string, ...any)

	peers    map[string]*peer // by address: the loop's alone
	keptLast map[string]bool  // addresses whose removal was refused as the folder's last (logged once)
	wake     chan struct{}    // a peer was found refusing: decide now
	stop     chan struct{}
	done     chan struct{}
}

// watchPeers starts watching the folder of own (see above).
func watchPeers(own *addressFile, interval time.Duration, witness string, log func(string, ...any)) *watcher {
	w := &watcher{own: own, timing: timingFor(interval), witness: witness, log: log, peers: map[string]*peer{},
		keptLast: map[string]bool{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// close stops the watch and waits for its loop: once it returns, no file is touched by it. The
// probes' goroutines end within a probe timeout.
func (w *watcher) close() {
	close(w.stop)
	<-w.done
}

func (w *watcher) run() {
	defer close(w.done)
	tick := time.NewTicker(w.timing.interval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			for _, p := range w.peers {
				close(p.stop)
			}
			return
		case <-tick.C:
		case <-w.wake:
		}
		w.round()
	}
}

// gone is a peer's file to remove and why.
type gone struct{ path, addr, why string }

// round syncs the probes with the folder, then removes the files of gone peers and rewrites
// this replica's own file if it is missing (see above).
func (w *watcher) round() {
	dir := filepath.Dir(w.own.path)
	files, err := Addresses(dir)
	if err != nil {
		return
	}
	self := string(w.own.content)
	for _, addr := range files {
		if _, _, err := net.SplitHostPort(addr); err != nil || addr == self || w.peers[addr] != nil {
			continue
		}
		p := newPeer(addr)
		w.peers[addr] = p
		go p.watch(w.timing, w.wake)
	}
	listed := map[string]bool{}
	for _, addr := range files {
		listed[addr] = true
	}
	for addr, p := range w.peers {
		if !listed[addr] {
			close(p.stop)
			delete(w.peers, addr)
		}
	}

	heard := 1 // replicas whose host answered within the silence, this one included
	var dead, unheard []gone
	for path, addr := range files {
		p := w.peers[addr]
		if p == nil {
			continue
		}
		last, recent, quiet := p.state(w.timing.silence)
		switch {
		case last == refused:
			dead = append(dead, gone{path, addr, "its host refuses connections on that port (the process is gone)"})
		case !recent && quiet >= w.timing.silence:
			unheard = append(unheard, gone{path, addr, fmt.Sprintf("no answer for %.1fs", quiet.Seconds())})
		}
		if recent {
			heard++
		}
	}
	_, err = os.Stat(w.own.path)
	ownMissing := os.IsNotExist(err)
	if len(dead) == 0 && len(unheard) == 0 && !ownMissing {
		return
	}
	majority := 2*heard > len(w.peers)+1
	hears := fmt.Sprintf("hears %d of the folder's %d replicas", heard, len(w.peers)+1)

	defer lockFolder(dir)()
	// Its own file comes back only with a majority: its peers reach it again. The witness
	// is not enough: in a partition where both sides reach it but not each other, the side
	// whose file was removed would write it again and again.
	if ownMissing && majority {
		if _, err := os.Stat(w.own.path); os.IsNotExist(err) {
			if err := w.own.write(); err != nil {
				w.log("rewriting %s: %v", w.own.path, err)
			} else {
				w.log("wrote %s again: it was removed, and this replica %s", w.own.path, hears)
			}
		}
	}
	if len(unheard) > 0 {
		if evidence := w.evidence(majority, hears); evidence != "" {
			for i := range unheard {
				unheard[i].why += ", while this replica " + evidence
			}
			dead = append(dead, unheard...)
		}
	}
	for _, g := range dead {
		w.remove(g)
	}
}

// evidence says how this replica knows it is not the cut-off side of a partition, or "" when
// it does not: a majority of the folder's replicas answered, else the witness answers (asked
// only then: the watch sends nothing to it while its peers answer).
func (w *watcher) evidence(majority bool, hears string) string {
	switch {
	case majority:
		return hears
	case w.witness != "" && reaches(w.witness, w.timing.timeout):
		return "reaches the witness " + w.witness
	}
	return ""
}

// remove takes out a gone peer's file, unless it changed since it was read (a replica wrote it
// again) or it is the folder's last; the caller holds the folder's lock.
func (w *watcher) remove(g gone) {
	b, err := os.ReadFile(g.path)
	if err != nil || string(b) != g.addr {
		return
	}
	if others, _ := filepath.Glob(filepath.Join(filepath.Dir(g.path), addressGlob)); len(others) <= 1 {
		if !w.keptLast[g.addr] {
			w.keptLast[g.addr] = true
			w.log("kept %s (%s): it is the folder's last address file", g.path, g.why)
		}
		return
	}
	if err := os.Remove(g.path); err == nil {
		delete(w.keptLast, g.addr)
		w.log("removed %s: %s", g.path, g.why)
	}
}
