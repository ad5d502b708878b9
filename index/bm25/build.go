package bm25

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"needle/internal/atomicfile"
	"needle/internal/jsonfile"
	"needle/internal/option"
	"needle/internal/progress"
	"needle/internal/writer"
)

// BuildConfig says what Build indexes.
type BuildConfig struct {
	Corpus string // corpus JSONL: line i becomes row i; its "contents" is analyzed, its "id" breaks ties
	Out    string // output folder (created); partial work lives in Out/bm25.partial until done
	// MemoryBytes bounds the postings held in memory: past it they are written out as a
	// sorted run (and checkpointed), merged at the end. 0: DefaultMemoryBytes.
	MemoryBytes int64
	Threads     int  // analyzing goroutines (0: all cores)
	Restart     bool // discard a partial build of another corpus instead of refusing
	Version     string
	Log         io.Writer // progress; nil: none
}

// pipelineBytes is the memory of a build besides its postings: batches of rows being read and
// analyzed, run merge buffers.
const pipelineBytes = 128 << 20

// DefaultMemoryBytes is the postings budget of a build. At 5M Zipfian rows of 100 words on a
// 2-core Zen 3 (docs/measurements/2026-12-02-bm25-build-zen3.md) 320 MiB peaked at 457 MB
// resident against 384 MiB's 512 MB and 256 MiB's 379-392 MB, in about the same time
// (2:54-3:12 over the three; one sitting did not separate them): under a quarter of every
// pyserini peak measured on that corpus (1,995-2,482 MB). wiki-18 (21M passages) writes a few
// dozen runs, one per shard at each flush; the merge reads them all at once with 1 MiB each.
const DefaultMemoryBytes = 320 << 20

// batchRows is the rows read, analyzed and added at a time.
const batchRows = 1024

// Build turns cfg.Corpus into a BM25 index folder, streaming: memory is bounded by
// MemoryBytes whatever the corpus size. It is resumable: a run of postings is checkpointed
// with the corpus offset it reached, and a rerun on the same corpus goes on from the last
// checkpoint. A corpus line that is not a JSON object with a string "contents" keeps its
// row, as a document without terms (counted in Meta.BadRows).
func Build(cfg BuildConfig) error {
	if cfg.MemoryBytes <= 0 {
		cfg.MemoryBytes = DefaultMemoryBytes
	}
	if cfg.Threads <= 0 {
		cfg.Threads = runtime.GOMAXPROCS(0)
	}
	// Go's collector lets the heap grow to twice what is live before it collects: without a
	// limit a build with the default budget peaked at 1.4 GB resident (1M Zipfian rows). The
	// limit keeps the heap within the budget plus the pipeline's batches (300,000 such rows
	// with a 128 MiB budget: 292 MB resident); a lower limit already set is kept.
	limit := cfg.MemoryBytes + pipelineBytes
	if old := debug.SetMemoryLimit(-1); old > limit {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	}
	f, err := os.Open(cfg.Corpus)
	if err != nil {
		return option.Wrap("Corpus", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(cfg.Corpus)
	corpus := Corpus{Path: abs, Size: info.Size(), Mtime: info.ModTime().UnixNano()}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	if m, err := ReadMeta(cfg.Out); err == nil {
		if m.Corpus.Path == corpus.Path && m.Corpus.Size == corpus.Size && m.Corpus.Mtime == corpus.Mtime {
			fmt.Fprintf(writer.OrDiscard(cfg.Log), "needle: %s already holds the BM25 index of %s\n", cfg.Out, cfg.Corpus)
			return nil
		}
		if !cfg.Restart {
			return option.Fixf("Restart", "replaces it", "%s holds the BM25 index of another corpus (%s)", cfg.Out, m.Corpus.Path)
		}
		os.Remove(filepath.Join(cfg.Out, MetaName))
	}
	b, err := resume(cfg, corpus)
	if err != nil {
		return err
	}
	if _, err := f.Seek(b.st.Offset, io.SeekStart); err != nil {
		return err
	}
	if err := b.index(f); err != nil {
		return err
	}
	return b.finish()
}

// state is the checkpoint of a partial build (bm25.partial/state.json): what the runs
// written so far hold.
type state struct {
	Corpus           Corpus   `json:"corpus"` // Hash unset
	Offset           int64    `json:"offset"` // corpus bytes indexed
	Rows             int64    `json:"rows"`
	DocCount         int64    `json:"doc_count"`
	SumTotalTermFreq int64    `json:"sum_total_term_freq"`
	BadRows          int64    `json:"bad_rows"`
	Runs             []string `json:"runs"`
	Hash             []byte   `json:"hash"` // xxh64 state over the first Offset bytes
}

// builder holds a build's in-memory postings and its partial folder.
type builder struct {
	cfg     BuildConfig
	dir     string // Out/bm25.partial
	st      state
	hash    *xxhash.Digest
	norms   *os.File       // bm25.partial/norms, one byte per row
	ids     *os.File       // bm25.partial/ids
	idOff   *os.File       // bm25.partial/idoff
	idBytes int64          // bytes in ids so far
	post    []*runPostings // the current run's postings, one table per shard of terms (termShard)
	bar     *progress.Bar
}

// termShard is the shard of the postings tables that holds a term of hash h: a batch's
// postings are added by one goroutine per shard at once (the adds are a build's serial part;
// their time is mostly waiting for memory). Hash bits 32-39: runPostings uses the low bits
// for its slots and the high ones for its tags.
func termShard(h uint64, shards int) int { return int(h>>32&0xff) % shards }

// resume opens Out/bm25.partial, continuing the checkpoint there when it is of the same
// corpus, else starting anew.
func resume(cfg BuildConfig, corpus Corpus) (*builder, error) {
	b := &builder{cfg: cfg, dir: filepath.Join(cfg.Out, partialName), hash: xxhash.New()}
	for range max(1, min(cfg.Threads, 16)) {
		b.post = append(b.post, newRunPostings())
	}
	var st state
	err := jsonfile.Read(filepath.Join(b.dir, "state.json"), &st, func() error { return nil })
	switch {
	case err == nil && st.Corpus == corpus:
		if err := b.hash.UnmarshalBinary(st.Hash); err != nil {
			return nil, fmt.Errorf("%s: %w", b.dir, err)
		}
		b.st = st
		fmt.Fprintf(writer.OrDiscard(cfg.Log), "needle: resuming the BM25 build at row %d (%d runs)\n", st.Rows, len(st.Runs))
	case err == nil && !cfg.Restart:
		return nil, option.Fixf("Restart", "discards it", "%s holds a partial BM25 build of another corpus (%s)", b.dir, st.Corpus.Path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	default:
		if err := os.RemoveAll(b.dir); err != nil {
			return nil, err
		}
		b.st = state{Corpus: corpus}
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, err
	}
	// The row files may hold rows past the checkpoint: cut them back to it.
	var err2 error
	open := func(name string, size int64) *os.File {
		f, err := os.OpenFile(filepath.Join(b.dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			err = f.Truncate(size)
		}
		if err == nil {
			_, err = f.Seek(size, io.SeekStart)
		}
		if err != nil && err2 == nil {
			err2 = err
		}
		return f
	}
	b.norms = open("norms", b.st.Rows)
	b.idOff = open("idoff", 8*b.st.Rows)
	if b.st.Rows > 0 {
		var last [8]byte
		if _, err := b.idOff.ReadAt(last[:], 8*(b.st.Rows-1)); err != nil && err2 == nil {
			err2 = fmt.Errorf("%s: %w", b.dir, err)
		}
		b.idBytes = int64(binary.LittleEndian.Uint64(last[:]))
	}
	b.ids = open("ids", b.idBytes)
	return b, err2
}

// doc is one analyzed corpus row: its distinct terms (in first-seen order) and their
// frequencies, as offsets into its batch's arena.
type doc struct {
	id        []byte
	termEnds  []int32 // end of each distinct term in batch.arena, from the doc's start
	start     int32
	freqs     []int32
	hashes    []uint64 // termHash of each distinct term
	length    uint32   // terms indexed (Lucene's field length)
	bad, size int
}

// batch is batchRows lines: read by the reader, analyzed by a worker, added in order.
type batch struct {
	text        []byte   // the lines, back to back
	lines       [][]byte // views of text
	arena       []byte
	ids         []byte   // the docs' ids, back to back
	ends, freqs []int32  // the docs' termEnds and freqs, back to back
	hashes      []uint64 // the docs' hashes, back to back
	docs        []doc
	done        chan struct{}
}

// index reads the corpus from its checkpoint and adds every row, writing runs as memory fills.
func (b *builder) index(r io.Reader) error {
	b.bar = progress.Start(writer.OrDiscard(b.cfg.Log), progress.Options{Label: "corpus bytes", Total: b.st.Corpus.Size, Done: b.st.Offset})
	defer b.bar.Finish()
	jobs := make(chan *batch, 2*b.cfg.Threads)
	ordered := make(chan *batch, 2*b.cfg.Threads)
	// added batches come back to the reader, their slices kept: a batch's buffers grew from
	// nothing for every 1,024 rows (a tenth of an analyzing worker's time went to growing them)
	free := make(chan *batch, 4*b.cfg.Threads+2)
	var readErr error
	go func() { // reader
		defer close(jobs)
		defer close(ordered)
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			var bt *batch
			select {
			case bt = <-free:
				bt.reset()
			default:
				bt = &batch{}
			}
			bt.done = make(chan struct{})
			var ends []int
			for len(ends) < batchRows {
				line, err := br.ReadSlice('\n')
				bt.text = append(bt.text, line...)
				if err == bufio.ErrBufferFull {
					continue // a line longer than the buffer: read on
				}
				if len(bt.text) > 0 && (len(ends) == 0 || ends[len(ends)-1] < len(bt.text)) {
					ends = append(ends, len(bt.text))
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					readErr = err
					return
				}
			}
			if len(ends) == 0 {
				return
			}
			for i, end := range ends {
				start := 0
				if i > 0 {
					start = ends[i-1]
				}
				bt.lines = append(bt.lines, bt.text[start:end])
			}
			jobs <- bt
			ordered <- bt
		}
	}()
	var wg sync.WaitGroup
	for range b.cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a Analyzer
			var terms bag
			var rows rowReader
			for bt := range jobs {
				bt.analyze(&a, &terms, &rows)
				close(bt.done)
			}
		}()
	}
	var err error
	for bt := range ordered {
		<-bt.done
		if err == nil {
			err = b.add(bt)
		}
		select {
		case free <- bt:
		default:
		}
	}
	wg.Wait()
	if err == nil {
		err = readErr
	}
	if err != nil {
		return option.Wrap("Corpus", fmt.Errorf("%s: %w", b.cfg.Corpus, err))
	}
	return b.flush()
}

// reset empties a batch for reuse, keeping its slices.
func (bt *batch) reset() {
	bt.text, bt.lines, bt.arena, bt.ids = bt.text[:0], bt.lines[:0], bt.arena[:0], bt.ids[:0]
	bt.ends, bt.freqs, bt.hashes = bt.ends[:0], bt.freqs[:0], bt.hashes[:0]
}

// analyze fills bt.docs from bt.lines; terms and rows are the worker's scratch.
func (bt *batch) analyze(a *Analyzer, terms *bag, rows *rowReader) {
	bt.docs = slices.Grow(bt.docs[:0], len(bt.lines))[:len(bt.lines)]
	clear(bt.docs)
	for i, line := range bt.lines {
		d := &bt.docs[i]
		d.size = len(line)
		id, contents, ok := rows.read(line)
		if !ok {
			d.bad = 1
		}
		idStart := len(bt.ids)
		bt.ids = append(bt.ids, id...)
		d.id = bt.ids[idStart:len(bt.ids):len(bt.ids)]
		d.start = int32(len(bt.arena))
		terms.reset()
		a.Terms(contents, func(t []byte) {
			d.length++
			terms.add(t, math.MaxInt)
		})
		bt.arena = append(bt.arena, terms.text...)
		// the doc's ends and freqs are cut from batch-wide slices: two allocations a batch
		// rather than two a row (earlier rows keep their views when append moves the slices)
		first, n := len(bt.ends), len(bt.ends)+terms.len()
		bt.ends, bt.freqs, bt.hashes = append(bt.ends, terms.ends...), append(bt.freqs, terms.counts...), append(bt.hashes, terms.hashes...)
		d.termEnds, d.freqs, d.hashes = bt.ends[first:n:n], bt.freqs[first:n:n], bt.hashes[first:n:n]
	}
}

// add appends a batch's rows: postings in memory, norms and ids to their files; it writes a
// run when the postings pass the memory budget.
func (b *builder) add(bt *batch) error {
	var wg sync.WaitGroup
	first := b.st.Rows // the loop below moves b.st.Rows on while the shards add
	for shard, p := range b.post {
		wg.Go(func() { p.addBatch(bt, first, shard, len(b.post)) })
	}
	norms := make([]byte, len(bt.docs))
	var ids, offs []byte
	before := b.st.Offset
	for i := range bt.docs {
		d := &bt.docs[i]
		if d.length > 0 {
			b.st.DocCount++
			b.st.SumTotalTermFreq += int64(d.length)
		}
		b.st.BadRows += int64(d.bad)
		norms[i] = lengthToByte(d.length)
		ids = append(ids, d.id...)
		b.idBytes += int64(len(d.id))
		offs = binary.LittleEndian.AppendUint64(offs, uint64(b.idBytes))
		b.st.Rows++
		b.st.Offset += int64(d.size)
	}
	if _, err := b.norms.Write(norms); err != nil {
		return err
	}
	if _, err := b.ids.Write(ids); err != nil {
		return err
	}
	if _, err := b.idOff.Write(offs); err != nil {
		return err
	}
	for _, line := range bt.lines {
		b.hash.Write(line)
	}
	wg.Wait()
	b.bar.Add(b.st.Offset - before)
	var memory int64
	for _, p := range b.post {
		memory += p.memory()
	}
	if memory >= b.cfg.MemoryBytes {
		return b.flush()
	}
	return nil
}

// addBatch adds the postings of bt's terms of the given shard, its first doc being row first.
// A row's terms are found in three passes: load their slots, find their entries, load those
// entries, then append; the loads of a pass do not wait on each other, so the cache misses
// of a row's rare terms overlap instead of coming one after another.
func (r *runPostings) addBatch(bt *batch, first int64, shard, shards int) {
	var idx []int
	var touched uint32
	for i := range bt.docs {
		d := &bt.docs[i]
		mask := uint64(len(r.slots) - 1)
		for _, h := range d.hashes {
			if termShard(h, shards) == shard {
				touched += r.slots[h&mask].idx
			}
		}
		idx = idx[:0]
		prev := int32(0)
		for j, end := range d.termEnds {
			if h := d.hashes[j]; termShard(h, shards) == shard {
				idx = append(idx, r.termIndex(bt.arena[d.start+prev:d.start+end], h))
			}
			prev = end
		}
		for _, t := range idx {
			touched += r.terms[t].tailUsed
		}
		k := 0
		for j, h := range d.hashes {
			if termShard(h, shards) == shard {
				r.appendPosting(idx[k], first+int64(i), d.freqs[j])
				k++
			}
		}
	}
	r.touched = touched
}

// flush writes the postings in memory as the next sorted run and checkpoints: the row files
// are synced, then state.json names the run and the corpus offset it covers.
func (b *builder) flush() error {
	// each shard is a run of its own: no term is in two shards, so the merge joins a term's
	// postings from the runs of successive flushes only, in their order. The shards are
	// sorted and written at once: one after another left a core idle through each flush.
	var wg sync.WaitGroup
	errs := make([]error, len(b.post))
	for shard, p := range b.post {
		if p.len() == 0 {
			continue
		}
		name := fmt.Sprintf("run-%04d", len(b.st.Runs))
		b.st.Runs = append(b.st.Runs, name)
		wg.Go(func() {
			errs[shard] = atomicfile.Create(filepath.Join(b.dir, name), func(f *os.File) error { return writeRun(f, p) })
			p.reset()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, f := range []*os.File{b.norms, b.ids, b.idOff} {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	h, err := b.hash.MarshalBinary()
	if err != nil {
		return err
	}
	b.st.Hash = h
	return jsonfile.Write(filepath.Join(b.dir, "state.json"), &b.st, func() error { return nil })
}

// writeRun writes p as a sorted run (runPostings.writeTo).
func writeRun(f *os.File, p *runPostings) error {
	w := bufio.NewWriterSize(f, 1<<20)
	if err := p.writeTo(w); err != nil {
		return err
	}
	return w.Flush()
}

// finish merges the runs into the index files, moves the row files in place, writes
// bm25.json and removes the partial folder.
func (b *builder) finish() error {
	start := time.Now()
	for _, f := range []*os.File{b.norms, b.ids, b.idOff} {
		f.Close()
	}
	terms, err := b.merge()
	if err != nil {
		return err
	}
	if err := b.writeIDOffsets(); err != nil {
		return err
	}
	for from, to := range map[string]string{"norms": normsName, "ids": idsName} {
		if err := os.Rename(filepath.Join(b.dir, from), filepath.Join(b.cfg.Out, to)); err != nil {
			return err
		}
	}
	if err := atomicfile.SyncDir(b.cfg.Out); err != nil {
		return err
	}
	corpus := b.st.Corpus
	corpus.Hash = "xxh64:" + strconv.FormatUint(b.hash.Sum64(), 16)
	m := &Meta{Format: formatVersion, Analyzer: AnalyzerName, K1: DefaultK1, B: DefaultB, Corpus: corpus,
		Rows: b.st.Rows, DocCount: b.st.DocCount, SumTotalTermFreq: b.st.SumTotalTermFreq, Terms: terms,
		BadRows: b.st.BadRows, NeedleVersion: b.cfg.Version}
	if err := writeMeta(b.cfg.Out, m); err != nil {
		return err
	}
	fmt.Fprintf(writer.OrDiscard(b.cfg.Log), "needle: BM25 index of %d rows, %d terms in %s (merge %s)\n", m.Rows, m.Terms, b.cfg.Out, progress.Duration(time.Since(start)))
	return os.RemoveAll(b.dir)
}

// merge merges the runs into the dictionary, terms and postings of the output folder and
// writes its blocks as it goes; it returns the number of terms. The partial folder keeps its
// norms (a rerun killed here merges again from the same runs).
func (b *builder) merge() (terms int64, err error) {
	norms, err := os.ReadFile(filepath.Join(b.dir, "norms"))
	if err != nil {
		return 0, err
	}
	ni := normInverseTable(DefaultK1, DefaultB, b.st.SumTotalTermFreq, b.st.DocCount)
	err = atomicfile.Create(filepath.Join(b.cfg.Out, blockOffName), func(offFile *os.File) error {
		return atomicfile.Create(filepath.Join(b.cfg.Out, blocksName), func(blockFile *os.File) error {
			w, err := newBlockWriter(norms, &ni, offFile, blockFile)
			if err != nil {
				return err
			}
			pipe := startBlockPipe(w)
			terms, err = mergeRuns(b.dir, b.st.Runs, b.cfg.Out, pipe)
			if err != nil {
				err = fmt.Errorf("merging the runs of %s: %w", b.dir, err)
			}
			return cmp.Or(err, pipe.close())
		})
	})
	return terms, err
}

// writeIDOffsets writes bm25.idoff: a leading 0, then the end of each row's id.
func (b *builder) writeIDOffsets() error {
	src := filepath.Join(b.dir, "idoff")
	return atomicfile.Create(filepath.Join(b.cfg.Out, idOffName), func(f *os.File) error {
		if _, err := f.Write(make([]byte, 8)); err != nil {
			return err
		}
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(f, in)
		return err
	})
}
