package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

func read(b []byte) (Kind, []byte, error) {
	k, p, _, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)), nil)
	return k, p, err
}

func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	payloads := [][]byte{nil, []byte("x"), bytes.Repeat([]byte{7}, 70000)}
	for i, p := range payloads {
		stream = AppendFrame(stream, Kind(i+1), p)
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	var buf []byte
	for i, want := range payloads {
		k, got, b, err := ReadFrame(r, buf)
		buf = b
		if err != nil || k != Kind(i+1) || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: kind %v, %d bytes, err %v", i, k, len(got), err)
		}
	}
	if _, _, _, err := ReadFrame(r, buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// TestFrameDamage: every single flipped bit of a frame is caught (ErrCheck or a clear error,
// never a frame read as valid), and every truncation is io.ErrUnexpectedEOF or EOF.
func TestFrameDamage(t *testing.T) {
	frame := AppendFrame(nil, KindRecord, AppendRecordHeader(nil, 3, OpRaw, 0))
	for i := range frame {
		for bit := range 8 {
			bad := bytes.Clone(frame)
			bad[i] ^= 1 << bit
			if _, _, err := read(bad); err == nil {
				t.Fatalf("flip of bit %d of byte %d went unnoticed", bit, i)
			}
		}
	}
	for n := range len(frame) {
		_, _, err := read(frame[:n])
		if n == 0 && err != io.EOF || n > 0 && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	other := bytes.Clone(frame)
	other[2] = Proto + 1
	if _, _, err := read(other); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("protocol %d, this build speaks %d", Proto+1, Proto)) {
		t.Fatalf("other protocol: %v", err)
	}
}

// TestFrameLayout builds frames byte by byte from the layout in the package comment (the check:
// XXH3-64 of the payload seeded with bytes 0..8) and reads them back; PutHeader over a payload
// in several parts (a raw record's header, then the chunk in place) writes the same bytes.
func TestFrameLayout(t *testing.T) {
	for _, payload := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("weights"), 40000)} {
		want := []byte{'N', 'W', Proto, byte(KindRecord)}
		want = binary.LittleEndian.AppendUint32(want, uint32(len(payload)))
		want = binary.LittleEndian.AppendUint64(want, xxh3.HashSeed(payload, binary.LittleEndian.Uint64(want)))
		want = append(want, payload...)
		if got := AppendFrame(nil, KindRecord, payload); !bytes.Equal(got, want) {
			t.Fatalf("%d-byte payload: frame % x..., want % x...", len(payload), got[:HeaderLen], want[:HeaderLen])
		}
		for cut := range min(len(payload), 3) + 1 {
			var h [HeaderLen]byte
			PutHeader(h[:], KindRecord, payload[:cut], payload[cut:])
			if !bytes.Equal(h[:], want[:HeaderLen]) {
				t.Fatalf("%d-byte payload in parts cut at %d: header % x, want % x", len(payload), cut, h, want[:HeaderLen])
			}
		}
		if k, p, err := read(want); err != nil || k != KindRecord || !bytes.Equal(p, payload) {
			t.Fatalf("%d-byte payload read back: %v", len(payload), err)
		}
	}
}

// TestProtocol1Refused: a frame of protocol 1 (the same layout with an xxh64 of bytes 0..8
// and the payload), from a needle of an earlier release or a delta file it wrote, is refused
// as another protocol, on the wire and at rest, never read or reported as damage.
func TestProtocol1Refused(t *testing.T) {
	payload := Marshal(Hello{Node: "old", Wait: true})
	old := []byte{'N', 'W', 1, byte(KindHello)}
	old = binary.LittleEndian.AppendUint32(old, uint32(len(payload)))
	d := xxhash.New()
	d.Write(old)
	d.Write(payload)
	old = append(binary.LittleEndian.AppendUint64(old, d.Sum64()), payload...)
	_, _, err := read(old)
	_, _, _, perr := ParseFrame(old)
	for _, err := range []error{err, perr} {
		if err == nil || errors.Is(err, ErrCheck) || !strings.Contains(err.Error(), fmt.Sprintf("protocol 1, this build speaks %d", Proto)) {
			t.Fatalf("a protocol 1 frame: %v", err)
		}
	}
}

// TestProtocol2AtRest: a frame of protocol 2 (the same layout and check; protocol 3 added
// kinds) is read at rest, where a delta file of the previous release holds it, and refused on
// the wire, where the peer would not speak beats and joins.
func TestProtocol2AtRest(t *testing.T) {
	payload := AppendRecordHeader(nil, 3, OpRaw, 0)
	frame := binary.LittleEndian.AppendUint32([]byte{'N', 'W', 2, byte(KindRecord)}, uint32(len(payload)))
	frame = binary.LittleEndian.AppendUint64(frame, xxh3.HashSeed(payload, binary.LittleEndian.Uint64(frame)))
	frame = append(frame, payload...)
	if k, _, n, err := ParseFrame(frame); err != nil || k != KindRecord || n != len(frame) {
		t.Fatalf("a protocol 2 frame at rest: %v %v %d", k, err, n)
	}
	if _, _, err := read(frame); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("protocol 2, this build speaks %d", Proto)) {
		t.Fatalf("a protocol 2 frame on the wire: %v", err)
	}
}

func TestMessages(t *testing.T) {
	h := Hello{Node: "r1", Run: "abc", Have: 7, Wait: true}
	var got Hello
	if err := Unmarshal(KindHello, KindHello, Marshal(h), &got); err != nil || got != h {
		t.Fatalf("hello: %+v %v", got, err)
	}
	err := Unmarshal(KindError, KindPlan, Marshal(Error{Code: CodeGone, Message: "v3 overwritten"}), &Plan{})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeGone {
		t.Fatalf("error frame: %v", err)
	}
	if err := Unmarshal(KindEnd, KindPlan, []byte("{}"), &Plan{}); err == nil {
		t.Fatal("a frame of the wrong kind was accepted")
	}
	for _, bad := range []Hello{
		{Manifest: 3, Wait: true},
		{Resume: &Resume{From: 4, To: 4}},
		{Resume: &Resume{To: 4, Record: -1}},
		{Have: 3},
	} {
		if bad.Check() == nil {
			t.Errorf("Check accepted %+v", bad)
		}
	}
}

func TestRecord(t *testing.T) {
	p := append(AppendRecordHeader(nil, 1<<20, OpPacked, 2), "body"...)
	r, err := ParseRecord(p)
	if err != nil || r.Chunk != 1<<20 || r.Op != OpPacked || r.ElemSize != 2 || string(r.Body) != "body" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range [][]byte{
		p[:7],
		AppendRecordHeader(nil, 0, OpRaw, 2),
		AppendRecordHeader(nil, 0, OpAstraFlow, 3),
		AppendRecordHeader(nil, 0, 9, 0),
		append(AppendRecordHeader(nil, 0, OpRaw, 0)[:6], 1, 0),
	} {
		if _, err := ParseRecord(bad); err == nil {
			t.Errorf("ParseRecord accepted % x", bad)
		}
	}
}

// FuzzReadFrame: no input makes the reader panic or allocate past MaxPayload, and an accepted
// frame re-encodes to the bytes it was read from.
func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, KindHello, Marshal(Hello{Run: "r", Have: 1, Wait: true})))
	f.Add(AppendFrame(nil, KindRecord, append(AppendRecordHeader(nil, 2, OpAstraFlow, 4), make([]byte, 16)...)))
	f.Add(AppendFrame(nil, KindEnd, Marshal(End{Records: 3, Manifest: []uint64{1, 2, 3}})))
	f.Add([]byte("NW\x02\x04\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, p, err := read(b)
		if err != nil {
			return
		}
		if again := AppendFrame(nil, k, p); !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("frame re-encodes differently")
		}
		switch k {
		case KindRecord:
			ParseRecord(p)
		case KindHello:
			var h Hello
			if Unmarshal(k, KindHello, p, &h) == nil {
				h.Check()
			}
		}
	})
}
