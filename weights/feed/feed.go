// Package feed serves a store.Store over TCP in the protocol of package wire: to each
// client's Hello it answers a manifest, or a Plan and the plan's steps (full versions read in
// place from a snapshot, growing ones as their records arrive, delta steps streamed from their
// frames as they are produced), with beats while it has nothing to send. Every client has its
// own goroutine and reads shared, immutable data, so a slow client or one that stops reading
// holds back nobody else; a snapshot retired with abort (the sender is about to overwrite it,
// or a relay gave up the version it was receiving) closes the connections that read it.
// A sender's feed also keeps the Layout of the receivers that join it (layout.go).
package feed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"needle/internal/prom"
	"needle/weights/store"
	"needle/weights/wire"
)

// MemberSilence is Feed.Silence's default: twice a transfer's.
const MemberSilence = 2 * wire.DefaultSilence

// beat is a Beat frame.
var beat = wire.AppendFrame(nil, wire.KindBeat, nil)

// Feed answers weight-transfer clients from Store.
type Feed struct {
	Store *store.Store
	Log   *log.Logger // nil: discarded
	// IdleTimeout bounds the wait for a client's next Hello; WriteTimeout the time one frame
	// may take to go out (a client that stops reading is dropped after it). 0: no limit.
	IdleTimeout, WriteTimeout time.Duration
	// Silence is how long a member (a joined receiver) may send nothing before it counts as
	// lost (its host killed or cut off) and leaves the layout; members beat every BeatEvery.
	// The hosts below a lost relay notice its silence on their own transfers first (after
	// wire.DefaultSilence) and pull from the next upstream of their route; the layout only
	// catches up, so it can wait longer and not reorder itself for a host that was merely slow.
	Silence time.Duration
	// Token, if set, is the secret every client must prove first (wire.ServerHandshake).
	Token []byte
	// Layout, on a sender, lays out the receivers that join; nil (a relay) refuses joins.
	Layout *Layout

	reg                                 *prom.Registry
	conns, waiting, sentFull, sentDelta *prom.Value
	mu                                  sync.Mutex
	listeners                           []net.Listener
	clients                             map[net.Conn]bool
	closed                              bool
}

// New returns a feed of st that counts in reg.
func New(st *store.Store, reg *prom.Registry) *Feed {
	return &Feed{Store: st, IdleTimeout: 10 * time.Minute, WriteTimeout: time.Minute, Silence: MemberSilence, reg: reg,
		conns:     reg.Gauge("needle_weights_clients", "connected weight-transfer clients"),
		waiting:   reg.Gauge("needle_weights_clients_waiting", "clients waiting for a newer version"),
		sentFull:  reg.Counter("needle_weights_sent_bytes_total", "bytes sent to clients, by step kind", "kind", "full"),
		sentDelta: reg.Counter("needle_weights_sent_bytes_total", "bytes sent to clients, by step kind", "kind", "delta"),
	}
}

// count adds one to a counter of exchanges by the given labels.
func (s *Feed) count(name, help string, labels ...string) {
	s.reg.Counter(name, help, labels...).Add(1)
}

func (s *Feed) errs(cause string) {
	s.count("needle_weights_transfer_errors_total", "exchanges that ended in an error, by cause", "cause", cause)
}

func (s *Feed) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log.Printf(format, args...)
	}
}

// Serve accepts clients on ln until it is closed (Close).
func (s *Feed) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.handle(conn)
	}
}

// Close stops accepting and closes every client's connection (as the process's end would:
// clients reconnect, to this feed's successor or to their next upstream).
func (s *Feed) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	for c := range s.clients {
		c.Close()
	}
}

// track adds (or, with add false, removes) a client connection; false when the feed is
// closed (the connection is not served).
func (s *Feed) track(c net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.clients, c)
		return true
	}
	if s.closed {
		return false
	}
	if s.clients == nil {
		s.clients = map[net.Conn]bool{}
	}
	s.clients[c] = true
	return true
}

// conn is one client connection.
type conn struct {
	net.Conn
	s   *Feed
	br  *bufio.Reader
	buf []byte
}

func (s *Feed) handle(nc net.Conn) {
	defer nc.Close()
	if !s.track(nc, true) {
		return
	}
	defer s.track(nc, false)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	s.conns.Add(1)
	defer s.conns.Add(-1)
	c := &conn{Conn: nc, s: s, br: bufio.NewReaderSize(nc, 64<<10)}
	k, p, err := c.read()
	if err != nil {
		return
	}
	if err := wire.ServerHandshake(nc, c.br, s.Token, k, p); err != nil {
		s.errs(wire.CodeAuth)
		s.logf("weights: client %s: %v", nc.RemoteAddr(), err)
		return
	}
	if s.Token != nil {
		if k, p, err = c.read(); err != nil {
			return
		}
	}
	if k == wire.KindJoin {
		c.member(p)
		return
	}
	for {
		var h wire.Hello
		err = wire.Unmarshal(k, wire.KindHello, p, &h)
		if err == nil {
			err = h.Check()
		}
		if err != nil {
			c.fail(wire.CodeBadRequest, err.Error())
			return
		}
		if err := c.exchange(h); err != nil {
			return
		}
		if k, p, err = c.read(); err != nil {
			return
		}
	}
}

// read reads the client's next frame within IdleTimeout (logging why it could not).
func (c *conn) read() (wire.Kind, []byte, error) {
	if c.s.IdleTimeout > 0 {
		c.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
	}
	k, p, buf, err := wire.ReadFrame(c.br, c.buf)
	c.buf = buf
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.s.logf("weights: client %s: %v", c.RemoteAddr(), err)
	}
	return k, p, err
}

// await runs wait, sending a Beat each time it has waited BeatEvery (the client tells a
// server with nothing to send yet from a lost one by silence). It returns wait's error, or
// a lostClient when a beat could not be sent.
func (c *conn) await(ctx context.Context, wait func(context.Context) error) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, wire.BeatEvery)
		err := wait(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if err := c.write(beat); err != nil {
			return lostClient{err}
		}
	}
}

// lostClient is a write to the client that failed while waiting: the connection is gone.
type lostClient struct{ error }

func (e lostClient) Unwrap() error { return e.error }

// fail sends an Error frame; the exchange (and, for the caller, often the connection) ends.
func (c *conn) fail(code, msg string) error {
	c.s.errs(code)
	c.write(wire.AppendFrame(nil, wire.KindError, wire.Marshal(wire.Error{Code: code, Message: msg})))
	return fmt.Errorf("%s: %s", code, msg)
}

// write sends frame bytes within WriteTimeout.
func (c *conn) write(bufs ...[]byte) error {
	if c.s.WriteTimeout > 0 {
		c.SetWriteDeadline(time.Now().Add(c.s.WriteTimeout))
	}
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(c.Conn)
	return err
}

// exchange answers one Hello. An error means the connection cannot go on.
func (c *conn) exchange(h wire.Hello) error {
	if h.Manifest != 0 {
		m, ok := c.s.Store.Manifest(h.Run, h.Manifest)
		if !ok {
			return c.fail(wire.CodeNotFound, fmt.Sprintf("no manifest of run %q version %d here", h.Run, h.Manifest))
		}
		return c.write(wire.AppendFrame(nil, wire.KindManifest, wire.Marshal(m)))
	}
	tr, err := c.plan(h)
	if err != nil {
		return err
	}
	defer tr.Release()
	if len(tr.Plan.Steps) > 0 {
		kind := "delta"
		if tr.Full != nil {
			kind = "full"
		}
		c.s.count("needle_weights_transfers_total", "transfers served, by their first step (full, delta) and whether it resumed",
			"first", kind, "resumed", fmt.Sprint(tr.Plan.Resumed))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if tr.Full != nil { // the sender overwrites a retired half: stop reading it at once
		go func() {
			select {
			case <-tr.Full.Gone():
				c.Close()
			case <-ctx.Done():
			}
		}()
	}
	if err := c.write(wire.AppendFrame(nil, wire.KindPlan, wire.Marshal(tr.Plan))); err != nil {
		return err
	}
	first := tr.First
	if tr.Full != nil {
		if err := c.sendFull(ctx, tr.Full, first); err != nil {
			return c.broken(err, tr.Full)
		}
		first = 0
	}
	for _, st := range tr.Steps {
		if err := c.sendStep(ctx, st, first); err != nil {
			return err
		}
		first = 0
	}
	return nil
}

// plan waits for the store's plan, ending the wait if the client goes away meanwhile.
func (c *conn) plan(h wire.Hello) (*store.Transfer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan error, 1)
	c.SetReadDeadline(time.Time{})
	go func() { // a client sends nothing while it waits: any read result means it left
		_, err := c.br.Peek(1)
		if err == nil {
			err = errors.New("client sent bytes while waiting for its plan")
		}
		watched <- err
		cancel()
	}()
	c.s.waiting.Add(1)
	var tr *store.Transfer
	err := c.await(ctx, func(ctx context.Context) (err error) {
		tr, err = c.s.Store.Plan(ctx, h)
		return err
	})
	c.s.waiting.Add(-1)
	c.SetReadDeadline(time.Now()) // unblock the watcher
	werr := <-watched
	c.SetReadDeadline(time.Time{})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, werr
	case err != nil:
		return nil, err
	case !errors.Is(werr, os.ErrDeadlineExceeded):
		tr.Release()
		return nil, werr
	}
	return tr, nil
}

// broken turns an error while sending snap into the connection's end, telling the client
// why when the snapshot was retired under it (the connection is closed then; the message
// goes to the log).
func (c *conn) broken(err error, snap *store.Snapshot) error {
	select {
	case <-snap.Gone():
		c.s.errs(wire.CodeGone)
		c.s.logf("weights: client %s: version %d was overwritten while being sent in full; the client asks again", c.RemoteAddr(), snap.Version)
	default:
		c.s.errs("network")
	}
	return err
}

// sendFull sends snap as a full step from record first. When snap has its file open and the
// client is on TCP, each record's bytes go with sendfile (by reference to the file's pages:
// no copy through this process, which need not touch the mapping), corked so that a record's
// small header leaves with its bytes. A page overwritten while still in a socket buffer (the
// owner retired the version with abort and publishes over it) reaches the client changed:
// the record's frame check, made from the version's bytes, fails there and the client asks
// again, as it does when the retirement closes its connection. A growing snapshot's records
// are sent as they arrive, and its End once the whole version has.
func (c *conn) sendFull(ctx context.Context, snap *store.Snapshot, first int) error {
	l := snap.ChunkMap
	step := wire.Step{StepInfo: wire.StepInfo{To: snap.Version}, Size: l.Size, Chunk: l.Chunk, Header: l.Header, First: first}
	if err := c.write(wire.AppendFrame(nil, wire.KindStep, wire.Marshal(step))); err != nil {
		return err
	}
	var raw syscall.RawConn
	if tc, ok := c.Conn.(*net.TCPConn); ok && snap.File != nil {
		if rc, err := tc.SyscallConn(); err == nil && setCork(rc, true) == nil {
			raw = rc
			defer setCork(rc, false)
		}
	}
	for i := first; i < l.Chunks(); i++ {
		if err := c.await(ctx, func(ctx context.Context) error { return snap.WaitRecord(ctx, i) }); err != nil {
			return err
		}
		_, off, n := l.Span(i)
		head := snap.RawRecordHead(i)
		var err error
		if raw != nil {
			if err = c.write(head); err == nil {
				err = c.sendFile(raw, snap.File, off, n)
			}
		} else {
			err = c.write(head, snap.Data[off:off+n])
		}
		if err != nil {
			return err
		}
		c.s.sentFull.Add(float64(int64(len(head)) + n))
	}
	if err := c.await(ctx, snap.WaitComplete); err != nil {
		return err
	}
	end := wire.End{Records: l.Chunks(), Manifest: snap.KnownManifest()}
	return c.write(wire.AppendFrame(nil, wire.KindEnd, wire.Marshal(end)))
}

// sendFile sends n bytes of f from offset off on the connection behind rc, within WriteTimeout.
func (c *conn) sendFile(rc syscall.RawConn, f *os.File, off, n int64) error {
	if c.s.WriteTimeout > 0 {
		c.SetWriteDeadline(time.Now().Add(c.s.WriteTimeout))
	}
	src := int(f.Fd())
	var serr error
	err := rc.Write(func(fd uintptr) bool {
		for n > 0 {
			w, err := unix.Sendfile(int(fd), src, &off, int(n))
			n -= int64(max(w, 0))
			switch {
			case err == unix.EAGAIN:
				return false // the poller waits for room, then calls again
			case err == unix.EINTR:
			case err != nil:
				serr = fmt.Errorf("sendfile %s: %w", f.Name(), err)
				return true
			case w == 0:
				serr = fmt.Errorf("sendfile %s: the file ended %d bytes early", f.Name(), n)
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}

// setCork sets TCP_CORK: partial segments are held until it is cleared (which sends them).
func setCork(rc syscall.RawConn, on bool) error {
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) }); err != nil {
		return err
	}
	return serr
}

// sendStep streams a delta step's frames from record first as they are produced.
func (c *conn) sendStep(ctx context.Context, st *store.Step, first int) error {
	l := st.ChunkMap
	step := wire.Step{StepInfo: wire.StepInfo{From: st.From, To: st.To}, Size: l.Size, Chunk: l.Chunk, Header: l.Header, First: first}
	if err := c.write(wire.AppendFrame(nil, wire.KindStep, wire.Marshal(step))); err != nil {
		return err
	}
	i := first
	for ; ; i++ {
		var f []byte
		err := c.await(ctx, func(ctx context.Context) (err error) {
			f, err = st.Frame(ctx, i)
			return err
		})
		var lost lostClient
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &lost):
			c.s.errs("network")
			return err
		case err != nil:
			return c.fail(wire.CodeGone, fmt.Sprintf("step %d -> %d failed: %v", st.From, st.To, err))
		}
		if f == nil {
			break
		}
		if err := c.write(f); err != nil {
			c.s.errs("network")
			return err
		}
		c.s.sentDelta.Add(float64(len(f)))
	}
	return c.write(wire.AppendFrame(nil, wire.KindEnd, wire.Marshal(wire.End{Records: i, Manifest: st.Manifest()})))
}
