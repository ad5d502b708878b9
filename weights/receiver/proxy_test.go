package receiver

import (
	"io"
	"net"
	"sync"
	"testing"

	"needle/weights/wire"
)

// proxy sits between a receiver and its upstream on loopback and damages the stream the
// upstream sends: each new connection gets the next fault of the list (then none).
type proxy struct {
	addr   string
	mu     sync.Mutex
	faults []fault
	conns  int
}

// fault acts on a connection's downstream bytes once at byte at: cut it there (the receiver
// sees a truncated frame), flip that byte (a corrupt record), or stall (forward nothing more
// and call hit, which may kill the receiver).
type fault struct {
	at   int64
	kind string // "cut", "flip", "stall"
	hit  func()
}

func newProxy(t *testing.T, upstream string, faults ...fault) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxy{addr: ln.Addr().String(), faults: faults}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Faults are for transfers: a receiver's membership connection (its first frame a
			// join) passes untouched and takes none of them.
			first := make([]byte, wire.HeaderLen)
			if _, err := io.ReadFull(c, first); err != nil {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			u.Write(first)
			p.mu.Lock()
			var f *fault
			if p.conns < len(p.faults) && wire.Kind(first[3]) != wire.KindJoin {
				f = &p.faults[p.conns]
				p.conns++
			}
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { forward(c, u, f); c.Close(); u.Close() }()
		}
	}()
	return p
}

// forward copies src to dst, applying f.
func forward(dst io.Writer, src io.Reader, f *fault) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := src.Read(buf)
		b := buf[:k]
		if f != nil && n+int64(k) > f.at {
			i := f.at - n
			switch f.kind {
			case "flip":
				b[i] ^= 0x40
				f = nil
			case "cut", "stall":
				dst.Write(b[:i])
				if f.hit != nil {
					f.hit()
				}
				if f.kind == "stall" {
					io.Copy(io.Discard, src)
				}
				return
			}
		}
		n += int64(k)
		if _, werr := dst.Write(b); werr != nil || err != nil {
			return
		}
	}
}
