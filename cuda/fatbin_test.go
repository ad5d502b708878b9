package cuda

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// fatbin lays out a fatbin of the given images (kind 1 PTX or 2 ELF, architecture) with
// payloads of n bytes each, as FatbinEntries reads it.
func fatbin(n int, images ...[2]int) []byte {
	var body []byte
	for _, im := range images {
		h := make([]byte, 64)
		binary.LittleEndian.PutUint16(h, uint16(im[0]))
		binary.LittleEndian.PutUint32(h[4:], 64)
		binary.LittleEndian.PutUint64(h[8:], uint64(n))
		binary.LittleEndian.PutUint32(h[28:], uint32(im[1]))
		body = append(append(body, h...), make([]byte, n)...)
	}
	head := make([]byte, 16)
	binary.LittleEndian.PutUint32(head, 0xBA55ED50)
	binary.LittleEndian.PutUint16(head[4:], 1)
	binary.LittleEndian.PutUint16(head[6:], 16)
	binary.LittleEndian.PutUint64(head[8:], uint64(len(body)))
	return append(head, body...)
}

// TestFatbinEntries reads the images of a fatbin and refuses what is not one (the kernel
// packages' tests read the fatbins nvcc built, see cudatest.CheckPTX).
func TestFatbinEntries(t *testing.T) {
	got, err := FatbinEntries(fatbin(40, [2]int{2, 80}, [2]int{1, 80}, [2]int{2, 90}))
	want := []FatbinEntry{{false, 80}, {true, 80}, {false, 90}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("entries %v, %v; want %v", got, err, want)
	}
	if s := want[1].String() + ", " + want[2].String(); s != "compute_80 PTX, sm_90 ELF" {
		t.Errorf("names: %s", s)
	}
	good := fatbin(40, [2]int{2, 90})
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte(".version 7.0\n.target sm_80\n"), "not a fatbin"},
		{good[:len(good)-1], "past its"},
		{append(append([]byte{}, good[:16]...), good[16:40]...), "past its"},
		{fatbin(40, [2]int{3, 90}), "kind 3"},
	} {
		if _, err := FatbinEntries(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d bytes: %v, want an error with %q", len(c.b), err, c.want)
		}
	}
}
