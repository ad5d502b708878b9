package lifecycle

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// answer is what one probe of a peer's address found.
type answer int

const (
	answered answer = iota // an HTTP answer to GET /health: a process serves there
	refused                // the peer's host refused the connection: nothing listens on the port
	silent                 // no answer within the timeout, a closed connection, or an unreachable host
)

// watchTiming is the pace of the watch, all derived from one interval (--watch-interval) so
// that one setting scales it: a probe gets timeout to answer, and a peer that has not been
// heard from for silence is taken for unreachable.
type watchTiming struct{ interval, timeout, silence time.Duration }

func timingFor(interval time.Duration) watchTiming {
	return watchTiming{interval: interval, timeout: 4 * interval, silence: 8 * interval}
}

// peer is the watch of one address of the folder: a goroutine (watch) probes it, the
// watcher's loop reads its state.
type peer struct {
	addr string
	stop chan struct{} // closed when the address left the folder or the watcher stopped

	since time.Time // when the watch began

	mu    sync.Mutex
	last  answer    // what the latest probe found
	heard time.Time // when its host last answered (HTTP or a refusal); zero until it did
}

func newPeer(addr string) *peer {
	return &peer{addr: addr, stop: make(chan struct{}), since: time.Now(), last: silent}
}

// state returns what the latest probe found, whether the peer's host answered within silence,
// and for how long it has not (since the watch began, if it never did).
func (p *peer) state(silence time.Duration) (last answer, heard bool, quiet time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heard.IsZero() {
		return p.last, false, time.Since(p.since)
	}
	quiet = time.Since(p.heard)
	return p.last, quiet < silence, quiet
}

func (p *peer) record(a answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = a
	if a != silent {
		p.heard = time.Now()
	}
}

// watch probes the peer every interval until stop, and signals wake (without blocking) when
// it finds nothing listening. Between probes it waits on the idle keep-alive connection of the
// last probe: the peer's kernel closes that connection the moment the process dies, so a kill
// is seen within milliseconds, not at the next probe.
func (p *peer) watch(t watchTiming, wake chan<- struct{}) {
	var c *probeConn
	defer func() { c.close() }()
	next := time.Now()
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		var err error
		if c == nil {
			c, err = dialPeer(p.addr, t.timeout)
		}
		if err == nil {
			err = c.health(t.timeout)
		}
		if err != nil && c != nil && !isTimeout(err) {
			// A reused connection that was closed or reset: a fresh one tells a process that
			// is gone (refused) from one that closed an idle connection.
			c.close()
			if c, err = dialPeer(p.addr, t.timeout); err == nil {
				err = c.health(t.timeout)
			}
		}
		a := classify(err)
		p.record(a)
		if a == refused {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		if err != nil || c.closing {
			c.close()
			c = nil
		}
		if next = next.Add(t.interval); next.Before(time.Now()) {
			next = time.Now()
		}
		if c != nil && c.idleUntil(next) != nil {
			c.close() // closed by the peer: probe again at once
			c, next = nil, time.Now()
			continue
		}
		select {
		case <-p.stop:
			return
		case <-time.After(time.Until(next)):
		}
	}
}

// probeConn is a keep-alive HTTP connection to a peer that carries GET /health probes.
type probeConn struct {
	net.Conn
	br      *bufio.Reader
	req     []byte
	closing bool // the peer answered Connection: close
}

func dialPeer(addr string, timeout time.Duration) (*probeConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	req := fmt.Sprintf("GET /health HTTP/1.1\r\nHost: %s\r\nUser-Agent: needle-peer-watch\r\n\r\n", addr)
	return &probeConn{Conn: c, br: bufio.NewReader(c), req: []byte(req)}, nil
}

// health sends one GET /health and reads the answer (any HTTP status: a process serves).
func (c *probeConn) health(timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(c.req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.closing = resp.Close
	return err
}

// idleUntil waits until deadline for the idle connection to end; nil if it is still open.
func (c *probeConn) idleUntil(deadline time.Time) error {
	c.SetReadDeadline(deadline)
	_, err := c.br.Peek(1)
	if isTimeout(err) {
		return nil
	}
	if err == nil {
		return errors.New("bytes from the peer while no probe was sent")
	}
	return err
}

func (c *probeConn) close() {
	if c != nil {
		c.Conn.Close()
	}
}

func classify(err error) answer {
	switch {
	case err == nil:
		return answered
	case errors.Is(err, syscall.ECONNREFUSED):
		return refused
	default:
		return silent
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
