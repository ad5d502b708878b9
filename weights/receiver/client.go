package receiver

import (
	"bufio"
	"context"
	"errors"
	"net"

	"needle/weights/wire"
)

// upstream is a connection to a weights server: the sender, or a receiver that re-serves.
type upstream struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
}

func dial(ctx context.Context, addr string) (*upstream, error) {
	var d net.Dialer
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
	return &upstream{addr: addr, nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}, nil
}

// ask sends hello and reads the answer's first frame (waiting as long as the server holds
// it); ctx ending closes the connection.
func (u *upstream) ask(ctx context.Context, hello wire.Hello, want wire.Kind, v any) error {
	stop := context.AfterFunc(ctx, func() { u.nc.Close() })
	defer stop()
	if err := wire.WriteFrame(u.nc, wire.KindHello, wire.Marshal(hello)); err != nil {
		return err
	}
	k, p, _, err := wire.ReadFrame(u.br, nil)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return wire.Unmarshal(k, want, p, v)
}

// next reads the next frame into buf.
func (u *upstream) next(buf []byte) (wire.Kind, []byte, []byte, error) {
	return wire.ReadFrame(u.br, buf)
}

// nextUnchecked reads the next frame into buf; the caller checks it.
func (u *upstream) nextUnchecked(buf []byte) (wire.Frame, []byte, error) {
	return wire.ReadUnchecked(u.br, buf)
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
