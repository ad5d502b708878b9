package wire

import (
	"bytes"
	"slices"
	"syscall"
	"testing"

	"github.com/cespare/xxhash/v2"

	"needle/safetensors/synth"
)

func TestChunks(t *testing.T) {
	img, hdr := synth.Image([]synth.Tensor{
		synth.T("a", "BF16", 40),   // 80 bytes: chunks of 32, 32, 16
		synth.T("empty", "F32", 0), // no chunks
		synth.T("b", "F32", 8),     // 32 bytes: one chunk
		synth.T("c", "U8", 3),      // 3 bytes: one short chunk
		synth.T("d", "I64", 2, 2),  // 32 bytes
	}, 1)
	l, err := NewChunkMap(img[:hdr], int64(len(img)), 32)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		tensor  int
		off, n  int64
		elemLen int
	}{{0, 0, 32, 2}, {0, 32, 32, 2}, {0, 64, 16, 2}, {2, 80, 32, 4}, {3, 112, 3, 0}, {4, 115, 32, 4}}
	if l.Chunks() != len(want) {
		t.Fatalf("%d chunks, want %d", l.Chunks(), len(want))
	}
	for i, w := range want {
		tensor, off, n := l.Span(i)
		if tensor != w.tensor || off != int64(hdr)+w.off || n != w.n || l.DeltaElem(tensor) != w.elemLen {
			t.Errorf("chunk %d: tensor %d [%d, +%d) elem %d, want %+v", i, tensor, off-int64(hdr), n, l.DeltaElem(tensor), w)
		}
	}
	hashes := l.Hash(img, 3)
	for i, h := range hashes {
		_, off, n := l.Span(i)
		if h != xxhash.Sum64(img[off:off+n]) {
			t.Errorf("chunk %d hash", i)
		}
	}
	if !l.Same(must(NewChunkMap(img[:hdr], int64(len(img)), 32))) || l.Same(must(NewChunkMap(img[:hdr], int64(len(img)), 64))) {
		t.Error("Same")
	}
}

func TestMatch(t *testing.T) {
	oldImg, oh := synth.Image([]synth.Tensor{synth.T("x", "BF16", 4), synth.T("y", "BF16", 4), synth.T("gone", "F32", 1), synth.T("z", "BF16", 2, 2)}, 1)
	newImg, nh := synth.Image([]synth.Tensor{synth.T("new", "F32", 2), synth.T("y", "F32", 4), synth.T("z", "BF16", 4), synth.T("x", "BF16", 4)}, 2)
	o := must(NewChunkMap(oldImg[:oh], int64(len(oldImg)), 8))
	n := must(NewChunkMap(newImg[:nh], int64(len(newImg)), 8))
	match := n.Match(o)
	if want := []int{-1, -1, -1, 0}; !slices.Equal(match, want) {
		t.Fatalf("match %v, want %v (dtype and shape changes have no base)", match, want)
	}
	last := n.Chunks() - 1 // x's chunk: at data byte 0 of old
	if off, ok := n.BaseOffset(o, match, last); !ok || off != int64(oh) {
		t.Fatalf("base of x at %d %v, want %d", off, ok, oh)
	}
	if _, ok := n.BaseOffset(o, match, 0); ok {
		t.Fatal("an added tensor has a base")
	}
	why, removed := n.Unmatched(o)
	want := map[string]string{"new": "added", "y": "dtype changed from BF16", "z": "shape changed from [2 2]"}
	if len(why) != len(want) || !slices.Equal(removed, []string{"gone"}) {
		t.Fatalf("unmatched %v, removed %v; want %v and [gone]", why, removed, want)
	}
	for k, v := range want {
		if why[k] != v {
			t.Errorf("%s: %q, want %q", k, why[k], v)
		}
	}
}

func TestRejects(t *testing.T) {
	img, hdr := synth.Image([]synth.Tensor{synth.T("a", "F32", 4)}, 1)
	for _, c := range []struct {
		size, chunk int64
	}{{int64(len(img)), 12}, {int64(len(img)), 0}, {int64(len(img)) + 4, 8}, {int64(hdr) - 1, 8}} {
		if _, err := NewChunkMap(img[:hdr], c.size, c.chunk); err == nil {
			t.Errorf("size %d chunk %d accepted", c.size, c.chunk)
		}
	}
}

func must(l *ChunkMap, err error) *ChunkMap {
	if err != nil {
		panic(err)
	}
	return l
}

// TestChunkMapOfOwnsItsHeader: the map read from a mapping keeps its header after the mapping
// is gone (a store's manifests and steps outlive their snapshot's pages: a read of them faulted).
func TestChunkMapOfOwnsItsHeader(t *testing.T) {
	img, _ := synth.Image([]synth.Tensor{synth.T("a", "BF16", 4096)}, 1)
	m, err := syscall.Mmap(-1, 0, len(img), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, img)
	l, err := ChunkMapOf(m, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Munmap(m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Header, img[:len(l.Header)]) { // a fault here, before the map owned it
		t.Fatal("the header changed with its mapping")
	}
}
