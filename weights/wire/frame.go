// Package wire is needle's weight-transfer protocol (protocol 3) and the one codec of weight
// deltas: what a sender, its receivers and a delta file of `needle delta` agree on.
//   - chunkmap.go: how one version of a safetensors file is cut into chunks, which tensor of a
//     base version each chunk is diffed against, and the manifest (the xxh64 of each chunk)
//     that identifies a version;
//   - record.go, codec.go: the record of one chunk: its raw bytes, or its delta from the base's
//     chunk in needle's packed format or AstraFlow's, found and scattered by the native kernels
//     of kernels/trainer/delta;
//   - encode.go, target.go: a whole step: every chunk of a new version encoded against the old
//     one on several goroutines, in chunk order; and a file image brought to the new version by
//     its records, each checked against the chunk map;
//   - frame.go, messages.go: frames that each carry an xxh3 check of their header fields and
//     payload; the JSON messages that open a transfer and close each of its steps, join a
//     sender's layout, keep a quiet connection alive and authenticate peers (auth.go).
//
// It does no I/O policy: callers own connections, files, buffers and deadlines.
//
// A frame (all integers little-endian):
//
//	0  "NW"       magic
//	2  u8         protocol version (Proto)
//	3  u8         kind
//	4  u32        payload length (at most MaxPayload)
//	8  u64        check: XXH3-64 of the payload, seeded with bytes 0..8 (as a u64)
//	16 payload
//
// The check covers kind and length (through the seed), so a frame whose header was damaged
// fails its check instead of being read as another kind; it sits before the payload so that
// a sender can write a precomputed frame with one writev. Protocol 1 had the same layout with
// an xxh64 of bytes 0..8 then the payload; XXH3 over one contiguous payload is ~3.5x faster on
// an AVX2 core (BenchmarkFrameCheck), and the frame checks were a sixth of a full version's CPU
// (every raw byte is hashed by the sender once and by each receiver). Frames of protocol 1 are
// refused, never read with the wrong check. Protocol 3 added beats, joins, routes and
// authentication; its frames at rest (a delta file: steps, records, ends) are protocol 2's, so a
// delta file of protocol 2 is still read.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/xxh3"
)

// Proto is the protocol version this build speaks; a frame of another version is an error
// that names both (but for restProto's frames at rest: ParseFrame).
const Proto = 3

// restProto is the oldest protocol whose frames at rest (a delta file's step, records, end)
// are read: they did not change since.
const restProto = 2

// HeaderLen is the size of a frame header.
const HeaderLen = 16

// MaxPayload bounds a frame's payload: a record of the largest chunk (MaxChunk) plus its
// record header, or a JSON message (a version's manifest: 8 bytes of hash per chunk).
const MaxPayload = MaxChunk + 1<<20

// MaxChunk is the largest chunk a chunk map may cut tensors into.
const MaxChunk = 64 << 20

// Kind is what a frame carries.
type Kind uint8

const (
	KindHello    Kind = 1  // client -> server: Hello (JSON)
	KindPlan     Kind = 2  // server -> client: Plan (JSON), then the plan's steps
	KindStep     Kind = 3  // server -> client: Step (JSON), opens one step of a plan
	KindRecord   Kind = 4  // server -> client: one Record of the open step
	KindEnd      Kind = 5  // server -> client: End (JSON), closes the open step
	KindError    Kind = 6  // server -> client: Error (JSON), ends the exchange
	KindManifest Kind = 7  // server -> client: Manifest (JSON), the answer to Hello.Manifest
	KindBeat     Kind = 8  // either way, empty: "still here" on a connection with nothing else to say
	KindJoin     Kind = 9  // client -> sender: Join (JSON), opens a membership connection
	KindRoute    Kind = 10 // sender -> member: Route (JSON), the upstreams to pull from
	KindAuth     Kind = 11 // either way: Auth (JSON), the token handshake (auth.go)
)

var kindNames = map[Kind]string{KindHello: "hello", KindPlan: "plan", KindStep: "step", KindRecord: "record",
	KindEnd: "end", KindError: "error", KindManifest: "manifest", KindBeat: "beat", KindJoin: "join", KindRoute: "route",
	KindAuth: "auth"}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// ErrCheck is wrapped by every error about a frame whose bytes are not what its sender
// wrote (bad magic, unknown kind, check mismatch): the stream can no longer be trusted.
var ErrCheck = errors.New("frame check failed")

// PutHeader fills h (HeaderLen bytes) for a frame of kind k whose payload is the
// concatenation of parts, computing the check over them.
func PutHeader(h []byte, k Kind, parts ...[]byte) {
	var n int
	for _, p := range parts {
		n += len(p)
	}
	h[0], h[1], h[2], h[3] = 'N', 'W', Proto, byte(k)
	binary.LittleEndian.PutUint32(h[4:], uint32(n))
	var sum uint64
	if len(parts) == 1 { // one pass over the payload, no staging through the hasher's buffer
		sum = xxh3.HashSeed(parts[0], checkSeed(h))
	} else {
		d := xxh3.NewSeed(checkSeed(h))
		for _, p := range parts {
			d.Write(p)
		}
		sum = d.Sum64()
	}
	binary.LittleEndian.PutUint64(h[8:], sum)
}

// checkSeed is the seed of a frame's check: its header's first 8 bytes.
func checkSeed(h []byte) uint64 { return binary.LittleEndian.Uint64(h[:8]) }

// AppendFrame appends a whole frame of kind k with the given payload to dst.
func AppendFrame(dst []byte, k Kind, payload []byte) []byte {
	var h [HeaderLen]byte
	PutHeader(h[:], k, payload)
	return append(append(dst, h[:]...), payload...)
}

// WriteFrame writes a frame of kind k with the given payload to w.
func WriteFrame(w io.Writer, k Kind, payload []byte) error {
	_, err := w.Write(AppendFrame(make([]byte, 0, HeaderLen+len(payload)), k, payload))
	return err
}

// ReadFrame reads one frame from r into buf (grown if needed) and returns its kind and
// payload (a view of the returned buffer, valid until the next call that reuses it). A
// stream that ends cleanly before a frame is io.EOF; one that ends inside a frame is
// io.ErrUnexpectedEOF; damaged bytes wrap ErrCheck.
func ReadFrame(r *bufio.Reader, buf []byte) (Kind, []byte, []byte, error) {
	f, buf, err := ReadUnchecked(r, buf)
	if err == nil {
		err = f.Check()
	}
	if err != nil {
		return 0, nil, buf, err
	}
	return f.Kind, f.Payload, buf, nil
}

// Frame is a frame read whole whose check has not been computed yet: a reader that hands
// records to other goroutines lets them check each one while it reads the next (on a full
// version the check reads every byte once more). Kind and Payload must not be acted on
// before Check returns nil.
type Frame struct {
	Head    [HeaderLen]byte
	Kind    Kind
	Payload []byte // a view of the reader's buffer
}

// Check verifies f's check against its header and payload; a mismatch wraps ErrCheck.
func (f *Frame) Check() error { return verify(f.Head[:], f.Kind, f.Payload) }

// ReadUnchecked is ReadFrame without the check, which the caller runs (Frame.Check) before
// trusting the frame: the header is parsed (magic, protocol, kind, length bound), the payload
// read into buf.
func ReadUnchecked(r *bufio.Reader, buf []byte) (Frame, []byte, error) {
	var f Frame
	if _, err := io.ReadFull(r, f.Head[:]); err != nil {
		return f, buf, err
	}
	k, n, err := parseHeader(f.Head[:], false)
	if err != nil {
		return f, buf, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	f.Kind, f.Payload = k, buf[:n]
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return f, buf, fmt.Errorf("%s frame of %d bytes: %w", k, n, err)
	}
	return f, buf, nil
}

// ParseFrame reads the frame at the start of b (frames at rest: a delta file) and returns its
// kind, its payload (a view of b) and its length in b. An empty b is io.EOF; one that ends
// inside the frame is io.ErrUnexpectedEOF; damaged bytes wrap ErrCheck.
func ParseFrame(b []byte) (Kind, []byte, int, error) {
	switch {
	case len(b) == 0:
		return 0, nil, 0, io.EOF
	case len(b) < HeaderLen:
		return 0, nil, 0, fmt.Errorf("frame header of %d bytes: %w", len(b), io.ErrUnexpectedEOF)
	}
	k, n, err := parseHeader(b, true)
	if err != nil {
		return 0, nil, 0, err
	}
	if len(b)-HeaderLen < n {
		return 0, nil, 0, fmt.Errorf("%s frame of %d bytes, %d left: %w", k, n, len(b)-HeaderLen, io.ErrUnexpectedEOF)
	}
	payload := b[HeaderLen : HeaderLen+n]
	if err := verify(b, k, payload); err != nil {
		return 0, nil, 0, err
	}
	return k, payload, HeaderLen + n, nil
}

// verify checks the check in header h against h's first 8 bytes and the payload.
func verify(h []byte, k Kind, payload []byte) error {
	if got, want := xxh3.HashSeed(payload, checkSeed(h)), binary.LittleEndian.Uint64(h[8:]); got != want {
		return fmt.Errorf("%s frame of %d bytes: check %016x, header says %016x: %w", k, len(payload), got, want, ErrCheck)
	}
	return nil
}

// parseHeader checks a frame header's magic, version, kind and length bound and returns its
// kind and payload length. A frame at rest may be of restProto.
func parseHeader(h []byte, atRest bool) (Kind, int, error) {
	if h[0] != 'N' || h[1] != 'W' {
		return 0, 0, fmt.Errorf("not a needle weights frame (magic %q): %w", h[:2], ErrCheck)
	}
	if h[2] != Proto && !(atRest && h[2] == restProto) {
		return 0, 0, fmt.Errorf("frame of weights protocol %d, this build speaks %d: the peer (or the delta file) is of another needle release", h[2], Proto)
	}
	k := Kind(h[3])
	if _, ok := kindNames[k]; !ok {
		return 0, 0, fmt.Errorf("unknown frame %s: %w", k, ErrCheck)
	}
	n := binary.LittleEndian.Uint32(h[4:])
	if n > MaxPayload {
		return 0, 0, fmt.Errorf("%s frame of %d bytes exceeds the %d-byte limit: %w", k, n, MaxPayload, ErrCheck)
	}
	return k, int(n), nil
}
