package indexbuild

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"needle/index/indexdir"

	"needle/internal/atomicfile"
	"needle/internal/byteview"
)

// A shard file holds the embeddings of rows [start, start+count) and the bad rows among
// them. Layout (little endian):
//
//	magic "NDLSHRD1" | key [32]byte | start u64 | count u32 | dim u32 | badLen u32 | crc u32
//	count*dim float32 | badLen bytes of JSON []indexdir.BadRow
//
// key is the hash of everything that decides the embeddings (see encodeState.key); crc is
// CRC-32C of everything after the header. Shards are written atomically, so a shard file
// that exists is complete; the checks catch a shard of other arguments or a damaged disk.
const (
	shardMagic  = "NDLSHRD1"
	shardHeader = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func shardPath(dir string, index int64) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%08d.bin", index))
}

// writeShard writes the embeddings emb (rows start.., width dim) and their bad rows to
// path atomically under key.
func writeShard(path string, key [32]byte, start int64, dim int, emb []float32, bad []indexdir.BadRow) error {
	badJSON, err := json.Marshal(bad)
	if err != nil {
		return err
	}
	body := make([]byte, 4*len(emb)+len(badJSON))
	putFloats(body, emb)
	copy(body[4*len(emb):], badJSON)
	head := make([]byte, shardHeader)
	copy(head, shardMagic)
	copy(head[8:40], key[:])
	binary.LittleEndian.PutUint64(head[40:], uint64(start))
	binary.LittleEndian.PutUint32(head[48:], uint32(len(emb)/dim))
	binary.LittleEndian.PutUint32(head[52:], uint32(dim))
	binary.LittleEndian.PutUint32(head[56:], uint32(len(badJSON)))
	binary.LittleEndian.PutUint32(head[60:], crc32.Checksum(body, castagnoli))
	return atomicfile.Create(path, func(f *os.File) error {
		if _, err := f.Write(head); err != nil {
			return err
		}
		_, err := f.Write(body)
		return err
	})
}

// errShardMissing means the shard file does not exist yet.
var errShardMissing = errors.New("shard missing")

// checkShard verifies the shard at path (key, row range, width, size, checksum) by reading
// it once, and returns its bad rows.
func checkShard(path string, key [32]byte, start, count int64, dim int) ([]indexdir.BadRow, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errShardMissing
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	head := make([]byte, shardHeader)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	gotStart := int64(binary.LittleEndian.Uint64(head[40:]))
	gotCount := int64(binary.LittleEndian.Uint32(head[48:]))
	gotDim := int(binary.LittleEndian.Uint32(head[52:]))
	badLen := int64(binary.LittleEndian.Uint32(head[56:]))
	switch {
	case string(head[:8]) != shardMagic:
		return nil, fmt.Errorf("%s: not a needle shard file", path)
	case [32]byte(head[8:40]) != key:
		return nil, fmt.Errorf("%s: written by a build with other arguments", path)
	case gotStart != start || gotCount != count || gotDim != dim:
		return nil, fmt.Errorf("%s: holds rows %d+%d of dim %d, want rows %d+%d of dim %d",
			path, gotStart, gotCount, gotDim, start, count, dim)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	floatBytes := 4 * count * int64(dim)
	if want := shardHeader + floatBytes + badLen; st.Size() != want {
		return nil, fmt.Errorf("%s: %d bytes, want %d", path, st.Size(), want)
	}
	crc := crc32.New(castagnoli)
	if _, err := io.CopyN(crc, r, floatBytes); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	badJSON := make([]byte, badLen)
	if _, err := io.ReadFull(r, badJSON); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	crc.Write(badJSON)
	if crc.Sum32() != binary.LittleEndian.Uint32(head[60:]) {
		return nil, fmt.Errorf("%s: checksum mismatch (damaged file)", path)
	}
	var bad []indexdir.BadRow
	if err := json.Unmarshal(badJSON, &bad); err != nil {
		return nil, fmt.Errorf("%s: bad rows: %w", path, err)
	}
	return bad, nil
}

// shardSet reads the rows of a build's checked shards (all of shardRows rows but the last).
type shardSet struct {
	dir       string
	rows      int64
	dim       int
	shardRows int64
}

func (s *shardSet) Len() int64 { return s.rows }
func (s *shardSet) Dim() int   { return s.dim }

// Read fills dst with rows [start, start+len(dst)/dim), which may span shards.
func (s *shardSet) Read(start int64, dst []float32) error {
	for len(dst) > 0 {
		idx, off := start/s.shardRows, start%s.shardRows
		n := min(int64(len(dst)/s.dim), s.shardRows-off)
		f, err := os.Open(shardPath(s.dir, idx))
		if err != nil {
			return err
		}
		err = readFloatsAt(f, shardHeader+4*off*int64(s.dim), dst[:n*int64(s.dim)])
		f.Close()
		if err != nil {
			return err
		}
		dst = dst[n*int64(s.dim):]
		start += n
	}
	return nil
}

// readFloatsAt fills dst with the little-endian float32s at byte offset off of r, read in
// place (this machine's floats are little-endian: internal/byteview).
func readFloatsAt(r io.ReaderAt, off int64, dst []float32) error {
	_, err := r.ReadAt(byteview.Float32s(dst), off)
	return err
}

// putFloats writes src into dst (4*len(src) bytes) as little-endian float32s.
func putFloats(dst []byte, src []float32) { copy(dst, byteview.Float32s(src)) }
