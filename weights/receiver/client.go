package receiver

import (
	"bufio"
	"context"
	"errors"
	"net"
	"time"

	"needle/weights/wire"
)

// upstream is a connection to a weights server: the sender, or a receiver that re-serves.
type upstream struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
}

// dial connects to addr and, with a token, runs the handshake. Reads then fail after silence
// without a byte (servers beat every wire.BeatEvery while they have nothing to send): a server
// whose host died or was cut off is noticed that fast, whatever the frame being read.
func dial(ctx context.Context, addr string, token []byte, silence time.Duration) (*upstream, error) {
	d := net.Dialer{Timeout: silence}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetReadBuffer(4 << 20)
	}
	// A buffer far below a record's size: bufio reads a payload larger than its buffer straight
	// into the caller's, so a raw record's bytes are copied once out of the socket, not twice.
	u := &upstream{addr: addr, nc: nc, br: bufio.NewReaderSize(silent{nc, silence}, 64<<10)}
	if token != nil {
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		err := wire.ClientHandshake(nc, u.br, token)
		stop()
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	return u, nil
}

// silent is a connection whose every read must see a byte within d.
type silent struct {
	net.Conn
	d time.Duration
}

func (s silent) Read(p []byte) (int, error) {
	s.SetReadDeadline(time.Now().Add(s.d))
	return s.Conn.Read(p)
}

// ask sends hello and reads the answer's first frame (waiting as long as the server holds
// it); ctx ending closes the connection.
func (u *upstream) ask(ctx context.Context, hello wire.Hello, want wire.Kind, v any) error {
	stop := context.AfterFunc(ctx, func() { u.nc.Close() })
	defer stop()
	if err := wire.WriteFrame(u.nc, wire.KindHello, wire.Marshal(hello)); err != nil {
		return err
	}
	k, p, _, err := u.next(nil)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return wire.Unmarshal(k, want, p, v)
}

// next reads the next frame but beats into buf.
func (u *upstream) next(buf []byte) (wire.Kind, []byte, []byte, error) {
	for {
		k, p, nbuf, err := wire.ReadFrame(u.br, buf)
		if err != nil || k != wire.KindBeat {
			return k, p, nbuf, err
		}
		buf = nbuf
	}
}

// nextUnchecked reads the next frame but beats into buf; the caller checks it (a beat, empty,
// is checked here).
func (u *upstream) nextUnchecked(buf []byte) (wire.Frame, []byte, error) {
	for {
		f, nbuf, err := wire.ReadUnchecked(u.br, buf)
		if err != nil || f.Kind != wire.KindBeat {
			return f, nbuf, err
		}
		if err := f.Check(); err != nil {
			return f, nbuf, err
		}
		buf = nbuf
	}
}

func (u *upstream) close() { u.nc.Close() }

// serverSaid reports whether err is an Error frame with one of codes.
func serverSaid(err error, codes ...string) bool {
	var e *wire.Error
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e.Code == c {
			return true
		}
	}
	return false
}
