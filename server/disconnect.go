package server

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// errClientGone is the cause of a request context ended by watchDisconnect.
var errClientGone = errors.New("the client closed its connection")

// watchDisconnect returns the context a /retrieve handler hands to the engine (or waits on
// while the index loads, awaitReady): it ends
// (cause errClientGone) when the client closes its connection while the handler waits,
// so the engine drops the request's queries that are not encoded yet. fasthttp reads
// nothing from a connection while its handler runs and so never notices the close itself.
// The watch parks in Go's netpoller until the socket turns readable (no polling): EOF or a
// reset means the client is gone; bytes (a pipelined request) end the watch, as then
// nothing can be known until fasthttp reads them. stop ends the watch and must be called
// before the handler returns.
//
// The context is cut off from fasthttp's own cancellation (every RequestCtx is canceled
// when Shutdown begins, which would fail the queued requests --drain lets finish).
func (s *Server) watchDisconnect(ctx *fasthttp.RequestCtx) (_ context.Context, stop func()) {
	watched, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	c, _ := ctx.Conn().(*limitedConn)
	var raw syscall.RawConn
	if c != nil {
		if tcp, ok := c.Conn.(*net.TCPConn); ok {
			raw, _ = tcp.SyscallConn()
		}
	}
	if raw == nil { // in-memory connections (tests, benchmarks): nothing to watch
		return watched, func() { cancel(nil) }
	}
	// No deadline while watching: fasthttp's ReadTimeout, counted from the request's first
	// byte, would end the watch of a long request (a held one, a 2,560-query POST on a busy
	// machine). fasthttp sets its own deadline again before it reads the next request.
	_ = c.Conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		_ = raw.Read(func(fd uintptr) bool {
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // nothing yet: park until readable, a deadline or stop
			case (err == nil && n == 0) || errors.Is(err, unix.ECONNRESET):
				s.metrics.disconnects.Add(1)
				cancel(errClientGone)
			}
			return true
		})
	}()
	return watched, func() {
		// A read deadline in the past wakes the parked watch; fasthttp sets its own
		// deadline before it reads the connection's next request.
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		cancel(nil)
	}
}
