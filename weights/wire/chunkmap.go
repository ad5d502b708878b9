package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"

	"needle/safetensors"
)

// A ChunkMap cuts one version of a safetensors file into the chunks that records carry: each
// tensor's bytes in pieces of Chunk bytes (a tensor's last piece may be shorter), numbered in
// file order across tensors. A version's manifest is the xxh64 of each chunk. Sender, receivers
// and delta files all number chunks this way, so a record names its chunk by one integer.

// DefaultChunk is the chunk size senders use unless told otherwise: large enough that a
// record's fixed costs (headers, a zstd frame) are a small share of a delta at 1% changed,
// small enough that a chunk's old and new bytes stay in the L3 cache between encoding and
// hashing them.
const DefaultChunk = 1 << 20

// ChunkMap is one version's chunk map. Immutable once made; safe for concurrent use.
type ChunkMap struct {
	Header  []byte               // the file's first bytes: 8-byte length and JSON
	Size    int64                // bytes of the whole file
	Chunk   int64                // bytes of a full chunk
	Tensors []safetensors.Tensor // in file order; Begin/End relative to the data section
	first   []int                // first chunk of each tensor; first[len(Tensors)] = all chunks
}

// NewChunkMap parses header for a file of size bytes cut into chunk-byte chunks. The tensors
// must cover the data section exactly (no holes, nothing after the last): chunks carry tensor
// bytes only, so a hole would not be transferred.
func NewChunkMap(header []byte, size, chunk int64) (*ChunkMap, error) {
	if chunk <= 0 || chunk > MaxChunk || chunk%8 != 0 {
		return nil, fmt.Errorf("chunk of %d bytes: want a multiple of 8 in (0, %d]", chunk, MaxChunk)
	}
	if size < int64(len(header)) {
		return nil, fmt.Errorf("file of %d bytes is shorter than its %d-byte header", size, len(header))
	}
	tensors, _, err := safetensors.ParseHeader(header, size-int64(len(header)))
	if err != nil {
		return nil, err
	}
	l := &ChunkMap{Header: header, Size: size, Chunk: chunk, Tensors: tensors, first: make([]int, len(tensors)+1)}
	var end int64
	for i, t := range tensors {
		if t.Begin != end {
			return nil, fmt.Errorf("tensor %q starts at data byte %d, after a hole from %d", t.Name, t.Begin, end)
		}
		end = t.End
		l.first[i+1] = l.first[i] + int((t.End-t.Begin+chunk-1)/chunk)
	}
	if end != size-int64(len(header)) {
		return nil, fmt.Errorf("tensors end at data byte %d, the data section has %d", end, size-int64(len(header)))
	}
	return l, nil
}

// ChunkMapOf reads the chunk map of data, a whole safetensors file, cut into chunk-byte chunks.
// Its Header is a copy: data is often a mapping that ends before the map does (a store's steps
// and manifests outlive the snapshot they were read from; a manifest marshaled after its
// snapshot was unmapped read freed pages).
func ChunkMapOf(data []byte, chunk int64) (*ChunkMap, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes is not a safetensors file", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("safetensors header length %d exceeds the file's %d bytes", n, len(data))
	}
	return NewChunkMap(bytes.Clone(data[:8+n]), int64(len(data)), chunk)
}

// Chunks is the number of chunks (and of records of a full transfer).
func (l *ChunkMap) Chunks() int { return l.first[len(l.Tensors)] }

// Span returns chunk i's tensor and its byte range [off, off+n) in the file.
func (l *ChunkMap) Span(i int) (tensor int, off, n int64) {
	tensor = tensorOf(l.first, i)
	t := l.Tensors[tensor]
	begin := t.Begin + int64(i-l.first[tensor])*l.Chunk
	return tensor, int64(len(l.Header)) + begin, min(l.Chunk, t.End-begin)
}

// tensorOf returns the tensor whose chunk range holds chunk i (first is increasing; tensors of
// no bytes have empty ranges and are never returned).
func tensorOf(first []int, i int) int {
	t, _ := slices.BinarySearch(first, i+1)
	return t - 1
}

// DeltaElem is the element width a delta of tensor t compares: 2 for 2-byte dtypes, 4 for
// 4- and 8-byte ones (an 8-byte element is two 4-byte words: bits are bits), 0 for 1-byte
// dtypes, which travel raw when they change.
func (l *ChunkMap) DeltaElem(t int) int {
	switch safetensors.DTypeSize(l.Tensors[t].DType) {
	case 2:
		return 2
	case 4, 8:
		return 4
	}
	return 0
}

// Same reports whether o lays its file out exactly as l (same header bytes and chunk size):
// then every chunk of one lies where the same chunk of the other does.
func (l *ChunkMap) Same(o *ChunkMap) bool {
	return o != nil && l.Chunk == o.Chunk && l.Size == o.Size && bytes.Equal(l.Header, o.Header)
}

// Match returns, for each tensor of l, the index of base's tensor of the same name, dtype
// and shape (its bytes are the delta base of the tensor's chunks), or -1 when base has none.
func (l *ChunkMap) Match(base *ChunkMap) []int {
	match, _, _ := l.match(base)
	return match
}

// Unmatched says why each tensor of l that has no base in base (Match) has none, by name:
// "added", "dtype changed from F32", "shape changed from [8 8]"; and which of base's tensors
// l does not have (removed), in base's order.
func (l *ChunkMap) Unmatched(base *ChunkMap) (why map[string]string, removed []string) {
	_, why, removed = l.match(base)
	return why, removed
}

func (l *ChunkMap) match(base *ChunkMap) (match []int, why map[string]string, removed []string) {
	byName := make(map[string]int, len(base.Tensors))
	for j, t := range base.Tensors {
		byName[t.Name] = j
	}
	match, why = make([]int, len(l.Tensors)), map[string]string{}
	kept := make([]bool, len(base.Tensors))
	for i, t := range l.Tensors {
		j, ok := byName[t.Name]
		switch {
		case !ok:
			why[t.Name] = "added"
		case base.Tensors[j].DType != t.DType:
			why[t.Name] = "dtype changed from " + base.Tensors[j].DType
		case !slices.Equal(base.Tensors[j].Shape, t.Shape):
			why[t.Name] = fmt.Sprintf("shape changed from %v", base.Tensors[j].Shape)
		}
		if ok {
			kept[j] = true
		}
		if _, no := why[t.Name]; no {
			j = -1
		}
		match[i] = j
	}
	for j, t := range base.Tensors {
		if !kept[j] {
			removed = append(removed, t.Name)
		}
	}
	return match, why, removed
}

// BaseOffset returns where chunk i of l starts in a file of chunk map base (match is l.Match(base)),
// or false when its tensor has no base there.
func (l *ChunkMap) BaseOffset(base *ChunkMap, match []int, i int) (int64, bool) {
	t, off, _ := l.Span(i)
	j := match[t]
	if j < 0 {
		return 0, false
	}
	return off - int64(len(l.Header)) - l.Tensors[t].Begin + base.Tensors[j].Begin + int64(len(base.Header)), true
}

// Hash returns the manifest of data, a whole file of chunk map l: the xxh64 of each chunk,
// computed by threads goroutines.
func (l *ChunkMap) Hash(data []byte, threads int) []uint64 {
	out := make([]uint64, l.Chunks())
	threads = max(threads, 1)
	hash := func(w int) {
		for i := w; i < len(out); i += threads {
			_, off, n := l.Span(i)
			out[i] = xxhash.Sum64(data[off : off+n])
		}
	}
	if threads == 1 { // on the caller's thread (which may have a priority of its own: idle.Run)
		hash(0)
		return out
	}
	var wg sync.WaitGroup
	for w := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hash(w)
		}()
	}
	wg.Wait()
	return out
}
