package docstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"needle/internal/mapfile"
)

// The url index sidecar: the common header (extra1 = slots, a power of two; extra2 = bad
// rows), then an open-addressing table of slots entries, linear probing, at most half full:
//
//	hash u64 (FNV-1a of the decoded url) | row+1 u64 (0 = empty) | url start u32 | url len u32
//
// where url start/len locate the url's raw JSON string (between its quotes) in the row, so
// a probe compares urls without parsing the row.
const (
	urlsMagic = "NDLURL01"
	urlsExt   = ".needle-urls"
	entrySize = 24
)

// Pages is a pages JSONL file (ASearcher's wiki_webpages.jsonl: one JSON object per line
// with a string `url`, usually `contents` too) with an on-disk url index. Rows whose line
// is not a JSON object with a string `url` are left out of the index and counted.
// Safe for concurrent use; Close only after all readers are done.
type Pages struct {
	lines *lineFile
	side  []byte // the whole url index sidecar
	table []byte // side[headerSize:]
	mask  uint64 // slots - 1
	bad   int64
}

// OpenPages maps the pages file at path with its offsets and url index sidecars (built
// first if missing or stale). Building reads and checks every line once.
func OpenPages(path string, opt Options) (*Pages, error) {
	l, err := openLines(path, opt)
	if err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	p := &Pages{lines: l}
	fresh := func(side []byte) bool {
		h := getHeader(side)
		return h.magic == urlsMagic && h.fp == l.fp && h.rows == l.rows && h.extra1 > 0 && h.extra1 < 1<<40 &&
			h.extra1&(h.extra1-1) == 0 && int64(len(side)) == headerSize+entrySize*h.extra1
	}
	p.side, _, err = findOrBuild(path, urlsExt, opt, fresh, func(dst *os.File) error {
		return p.writeIndex(dst, opt.Progress)
	})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("pages: %w", err)
	}
	h := getHeader(p.side)
	p.table, p.mask, p.bad = p.side[headerSize:], uint64(h.extra1-1), h.extra2
	return p, nil
}

// NormalizeURL is the request-side rewrite of the ASearcher /access anchor
// (tools/local_retrieval_server.py, PageAccess.access): every "index.php/" becomes
// "index.php?title=". Stored page urls are NOT rewritten (the anchor keys its dict by the
// raw `url` field), so a stored url containing "index.php/" can never be found.
func NormalizeURL(url string) string {
	return strings.ReplaceAll(url, "index.php/", "index.php?title=")
}

// Lookup returns the page row (the whole JSON line, a view valid until Close) whose `url`
// equals NormalizeURL(url) exactly. When several rows have that url the last one wins, as
// in the anchor's dict. No allocation unless url contains "index.php/" or a candidate's
// stored url has JSON escapes.
func (p *Pages) Lookup(url string) ([]byte, bool) {
	url = NormalizeURL(url)
	h := fnv1a(url)
	// At most every slot once: a table the build left half empty always stops at an empty
	// slot, but a damaged sidecar must not make this loop forever.
	for n, s := uint64(0), h&p.mask; n <= p.mask; n, s = n+1, (s+1)&p.mask {
		e := p.table[s*entrySize : (s+1)*entrySize]
		row := binary.LittleEndian.Uint64(e[8:])
		if row == 0 {
			return nil, false
		}
		if binary.LittleEndian.Uint64(e[0:]) != h {
			continue
		}
		line, raw := p.entryURL(e)
		if raw != nil && jsonStringEquals(raw, url) {
			return line, true
		}
	}
	return nil, false
}

// Len is the number of lines; BadRows how many of them are not in the url index.
func (p *Pages) Len() int64     { return p.lines.rows }
func (p *Pages) BadRows() int64 { return p.bad }

// Validate checks every line as the index build does and returns the bad ones in order.
func (p *Pages) Validate(progress func(done, total int64)) ([]BadRowError, error) {
	return p.lines.validate("url", progress)
}

// Close unmaps the file and its sidecars; rows returned earlier become invalid.
func (p *Pages) Close() error {
	err := p.lines.Close()
	if p.side != nil {
		if e := unix.Munmap(p.side); err == nil {
			err = e
		}
		p.side, p.table = nil, nil
	}
	return err
}

// entryURL returns the row of a used table entry and its url's raw JSON string, or nils
// when the entry does not fit its row (a corrupt sidecar: treated as a miss).
func (p *Pages) entryURL(e []byte) (line, raw []byte) {
	line, err := p.lines.line(int64(binary.LittleEndian.Uint64(e[8:])) - 1)
	at, n := uint64(binary.LittleEndian.Uint32(e[16:])), uint64(binary.LittleEndian.Uint32(e[20:]))
	if err != nil || at+n > uint64(len(line)) {
		return nil, nil
	}
	return line, line[at : at+n]
}

// urlHit locates the url of one good page row: the raw JSON string at line[at:at+n].
type urlHit struct {
	row   int64
	hash  uint64 // of the decoded url
	at, n uint32
}

// writeIndex builds the url index of p.lines into dst, through a shared writable mapping
// of dst (the table never sits in the Go heap). Rows are checked on all cores; this
// goroutine inserts them.
func (p *Pages) writeIndex(dst *os.File, progress func(done, total int64)) error {
	l := p.lines
	slots := int64(16)
	if l.rows > 4 {
		slots = max(slots, int64(1)<<bits.Len64(uint64(2*l.rows-1)))
	}
	size := headerSize + entrySize*slots
	if err := dst.Truncate(size); err != nil {
		return err
	}
	side, err := mapfile.File(dst, size, true, false)
	if err != nil {
		return err
	}
	defer unix.Munmap(side)
	p.table, p.mask = side[headerSize:], uint64(slots-1)
	defer func() { p.table = nil }()

	var bad, done int64
	err = scanLines(l, func(i int64, line []byte) (urlHit, bool) {
		raw, at, reason := stringField(line, "url")
		if reason != "" || at+len(raw) > 1<<32-1 { // offsets past 4 GiB do not fit an entry
			return urlHit{}, false
		}
		return urlHit{row: i, hash: hashRawURL(raw), at: uint32(at), n: uint32(len(raw))}, true
	}, func(lo, hi int64, hits []urlHit) {
		bad += hi - lo - int64(len(hits))
		for _, h := range hits {
			p.insert(h)
		}
		if done += int64(l.offset(hi) - l.offset(lo)); progress != nil {
			progress(done, int64(len(l.data)))
		}
	})
	if err != nil {
		return err
	}
	header{magic: urlsMagic, fp: l.fp, rows: l.rows, extra1: slots, extra2: bad}.put(side)
	if err := unix.Msync(side, unix.MS_SYNC); err != nil {
		return fmt.Errorf("msync %s: %w", dst.Name(), err)
	}
	return nil
}

// insert adds h to the table. Of rows with the same url the last one wins (as in the
// anchor's dict), whatever order they are inserted in.
func (p *Pages) insert(h urlHit) {
	for s := h.hash & p.mask; ; s = (s + 1) & p.mask {
		e := p.table[s*entrySize : (s+1)*entrySize]
		if old := binary.LittleEndian.Uint64(e[8:]); old != 0 {
			if binary.LittleEndian.Uint64(e[0:]) != h.hash || !p.sameURL(e, h) {
				continue
			}
			if int64(old)-1 > h.row {
				return
			}
		}
		binary.LittleEndian.PutUint64(e[0:], h.hash)
		binary.LittleEndian.PutUint64(e[8:], uint64(h.row)+1)
		binary.LittleEndian.PutUint32(e[16:], h.at)
		binary.LittleEndian.PutUint32(e[20:], h.n)
		return
	}
}

// sameURL reports whether table entry e and h are the same url.
func (p *Pages) sameURL(e []byte, h urlHit) bool {
	_, old := p.entryURL(e)
	line, err := p.lines.line(h.row)
	return old != nil && err == nil && sameJSONString(old, line[h.at:h.at+h.n])
}

// hashRawURL hashes the decoded form of a raw JSON string, as Lookup hashes its url.
func hashRawURL(raw []byte) uint64 {
	if bytes.IndexByte(raw, '\\') < 0 {
		return fnv1a(raw)
	}
	return fnv1a(decodeJSONString(raw))
}

// sameJSONString reports whether two raw JSON strings decode to the same string.
func sameJSONString(a, b []byte) bool {
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return bytes.Equal(a, b)
	}
	return decodeJSONString(a) == decodeJSONString(b)
}

// fnv1a is 64-bit FNV-1a: stable across processes and Go versions, as an on-disk hash must be.
func fnv1a[T string | []byte](s T) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
