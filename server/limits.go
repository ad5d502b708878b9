package server

import (
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// refusal is why a request was answered before any handler ran; names are the
// Prometheus label values of needle_refused_total.
type refusal int

const (
	refusedBodyTooLarge refusal = iota
	refusedHeaderTooLarge
	refusedReadTimeout
	refusedMalformed
	refusedConnLimit
	numRefusals
)

var refusalNames = [numRefusals]string{"body_too_large", "header_too_large", "read_timeout", "malformed_request", "connection_limit"}

// connReserve is how many connections past Config.MaxConns are still accepted: on
// them /health is answered and every other request gets a JSON 503, then the
// connection closes. Past the reserve a connection gets the 503 before any request is
// read. fasthttp's own limit (Server.Concurrency) would answer a text 503 to /health
// too, so it is set above MaxConns + connReserve and never reached.
const connReserve = 64

const connLimitDetail = "the server's connection limit is reached"

// connLimitResponse is written to connections refused past the reserve.
var connLimitResponse = func() []byte {
	body := `{"detail":"` + connLimitDetail + `"}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n" +
		"Retry-After: 1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// limitListener counts the open connections it hands to fasthttp and marks those
// past the limit.
type limitListener struct {
	net.Listener
	s    *Server
	open atomic.Int64
}

// limitedConn is a connection of a limitListener; overLimit is fixed at accept.
type limitedConn struct {
	net.Conn
	ln        *limitListener
	overLimit bool
	closed    atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.ln.open.Add(-1)
	}
	return c.Conn.Close()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		n := l.open.Add(1)
		if n <= int64(l.s.cfg.MaxConns+connReserve) {
			return &limitedConn{Conn: c, ln: l, overLimit: n > int64(l.s.cfg.MaxConns)}, nil
		}
		l.open.Add(-1)
		l.s.metrics.refused[refusedConnLimit].Add(1)
		// The answer fits the socket's send buffer; the deadline bounds a peer that
		// stopped reading anyway, as this runs on the accept loop.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(connLimitResponse)
		_ = c.Close()
	}
}

// refuseOverLimit answers a request on a connection accepted past Config.MaxConns:
// /health is served, anything else gets a JSON 503; the connection then closes. It
// reports whether it answered.
func (s *Server) refuseOverLimit(ctx *fasthttp.RequestCtx) bool {
	c, ok := ctx.Conn().(*limitedConn)
	if !ok || !c.overLimit {
		return false
	}
	ctx.SetConnectionClose()
	if string(ctx.Path()) == "/health" {
		return false
	}
	s.metrics.refused[refusedConnLimit].Add(1)
	ctx.Response.Header.Set("Retry-After", "1")
	writeDetail(ctx, fasthttp.StatusServiceUnavailable, connLimitDetail)
	return true
}
