package milvusindex

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/milvuspb"
	"github.com/milvus-io/milvus-sdk-go/v2/client"
	"github.com/milvus-io/milvus-sdk-go/v2/entity"

	"needle/internal/npy"
	"needle/internal/option"
	"needle/internal/progress"
	"needle/internal/writer"
)

// Vectors are the rows a collection is built from (indexdir.Vectors): row i is
// corpus line i. Not used concurrently.
type Vectors interface {
	Len() int64
	Dim() int
	// Read fills dst with rows [start, start+len(dst)/Dim()).
	Read(start int64, dst []float32) error
}

// BuildOptions say where `needle build --milvus` writes and which index Milvus builds.
type BuildOptions struct {
	URI, Collection string
	IndexType       string // HNSW, IVF_FLAT, IVF_SQ8, IVF_PQ, FLAT, ... (Milvus's names); "" = HNSW
	// IndexParams is the index's build parameters as Milvus's JSON ("" = defaults: HNSW
	// M=16 efConstruction=256, IVF nlist=1024).
	IndexParams string
	Metric      string // "IP" (cosine on normalized vectors) or "L2"; "" = IP
	// InsertBytes bounds one insert request (Milvus's proxy takes at most 64 MiB); 0 = 4 MiB:
	// 16 MiB requests cost a Milvus 2.3 standalone 10.4 CPU-s per 100k 768-dim rows on
	// average (7.3-13.6), 4 MiB 7.7 (6.5-10.6).
	InsertBytes int
	// Inserts is how many insert requests are in flight at once (0 = 4): the proxy, the
	// message queue and the data node work on different requests at the same time.
	Inserts int
	// BulkDir, if set, sends the rows by Milvus's bulk import instead of insert requests:
	// NumPy files (row.npy, vector.npy) of up to 1 GiB of vectors are written into a temp
	// folder under BulkDir, which Milvus's data nodes must read at the same path (a
	// standalone Milvus with local storage on this machine; a cluster imports from its
	// object storage, which needle does not write to).
	BulkDir string
	Restart bool      // drop a collection built for other rows, dimension or index
	Log     io.Writer // progress and notes; nil = discard
}

// BuildReport is what Build did.
type BuildReport struct {
	Rows       int64         // rows in the collection at the end
	Resumed    int64         // rows an earlier run had inserted
	InsertTime time.Duration // of this run's inserts (Rows-Resumed rows)
	IndexTime  time.Duration // flush, index build and load after the inserts
}

func (o *BuildOptions) setDefaults() error {
	if o.IndexType == "" {
		o.IndexType = string(entity.HNSW)
	}
	o.IndexType = strings.ToUpper(o.IndexType)
	if o.Metric == "" {
		o.Metric = string(entity.IP)
	}
	o.Metric = strings.ToUpper(o.Metric)
	if o.Metric != string(entity.IP) && o.Metric != string(entity.L2) {
		return fmt.Errorf("metric %q: want IP or L2", o.Metric)
	}
	if o.IndexParams == "" {
		switch o.IndexType {
		case string(entity.HNSW):
			o.IndexParams = `{"M":16,"efConstruction":256}`
		case string(entity.IvfFlat), string(entity.IvfSQ8):
			o.IndexParams = `{"nlist":1024}`
		case string(entity.IvfPQ):
			o.IndexParams = `{"nlist":1024,"m":16,"nbits":8}`
		default:
			o.IndexParams = `{}`
		}
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(o.IndexParams), &p); err != nil {
		return fmt.Errorf("index params %q: %w", o.IndexParams, err)
	}
	if o.InsertBytes <= 0 {
		o.InsertBytes = 4 << 20
	}
	if o.Inserts <= 0 {
		o.Inserts = 4
	}
	o.Log = writer.OrDiscard(o.Log)
	return nil
}

// Build makes opt.Collection hold vecs: row i with primary key i. A collection of this
// build that an earlier run left unfinished (Milvus or needle went away) is resumed after
// the longest prefix of rows it holds; one built for other rows, dimension or index is an
// error unless opt.Restart. The collection is released while rows are inserted, then
// flushed, indexed (Build waits for it) and left loaded for search.
func Build(opt BuildOptions, vecs Vectors) (*BuildReport, error) {
	if err := opt.setDefaults(); err != nil {
		return nil, err
	}
	if vecs.Len() == 0 {
		return nil, fmt.Errorf("no rows to insert into milvus collection %q", opt.Collection)
	}
	ctx := context.Background()
	c, err := dial(ctx, opt.URI)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b := &builder{c: c, opt: opt, vecs: vecs, want: description{Needle: 1, Rows: vecs.Len(), Dim: vecs.Dim()}}
	created, err := b.prepare(ctx)
	if err != nil {
		return nil, err
	}
	// A collection created just now holds no rows and was never loaded: nothing to count or
	// release (loading an empty collection alone takes Milvus seconds).
	var start int64
	if !created {
		if start, err = b.resumeAt(ctx); err != nil {
			return nil, err
		}
		if start > 0 {
			fmt.Fprintf(opt.Log, "needle build: milvus collection %q holds rows 0..%d of an earlier run: resuming there\n", opt.Collection, start-1)
		}
		// Inserted rows go to the data nodes only: a loaded collection would also have its
		// query nodes consume them into growing segments (and interim indexes) meanwhile.
		if err := c.ReleaseCollection(ctx, opt.Collection); err != nil {
			return nil, fmt.Errorf("release milvus collection %q for the inserts: %w", opt.Collection, err)
		}
	}
	rep := &BuildReport{Resumed: start}
	began := time.Now()
	send := b.insert
	if opt.BulkDir != "" {
		send = b.bulkImport
	}
	if err := send(ctx, start); err != nil {
		return nil, err
	}
	rep.InsertTime = time.Since(began)
	began = time.Now()
	if err := b.finish(ctx); err != nil {
		return nil, err
	}
	if err := b.load(ctx); err != nil {
		return nil, err
	}
	rep.IndexTime = time.Since(began)
	if rep.Rows, err = count(ctx, c, opt.Collection, ""); err != nil {
		return nil, fmt.Errorf("count milvus collection %q: %w", opt.Collection, err)
	}
	if rep.Rows != vecs.Len() {
		return nil, fmt.Errorf("milvus collection %q holds %d rows after inserting %d", opt.Collection, rep.Rows, vecs.Len())
	}
	return rep, nil
}

type builder struct {
	c    client.Client
	opt  BuildOptions
	vecs Vectors
	want description
}

// prepare creates the collection with its index (created), or checks that the one there is
// of this build (replacing it when opt.Restart) and loads it, for resumeAt's counts.
func (b *builder) prepare(ctx context.Context) (created bool, err error) {
	coll := b.opt.Collection
	exists, err := b.c.HasCollection(ctx, coll)
	if err != nil {
		return false, fmt.Errorf("milvus at %s: %w", b.opt.URI, err)
	}
	if exists {
		why := b.other(ctx)
		if why == "" {
			return false, b.load(ctx)
		}
		if !b.opt.Restart {
			return false, option.Fixf("Restart", "replaces it", "milvus collection %q holds another build (%s)", coll, why)
		}
		fmt.Fprintf(b.opt.Log, "needle build: dropping milvus collection %q: it holds another build (%s)\n", coll, why)
		if err := b.c.DropCollection(ctx, coll); err != nil {
			return false, fmt.Errorf("drop milvus collection %q: %w", coll, err)
		}
	}
	schema := entity.NewSchema().WithName(coll).WithDescription(b.want.String()).
		WithField(entity.NewField().WithName(rowField).WithDataType(entity.FieldTypeInt64).WithIsPrimaryKey(true)).
		WithField(entity.NewField().WithName(vectorField).WithDataType(entity.FieldTypeFloatVector).WithDim(int64(b.want.Dim)))
	if err := b.c.CreateCollection(ctx, schema, 0); err != nil {
		return false, fmt.Errorf("create milvus collection %q: %w", coll, err)
	}
	idx := entity.NewGenericIndex("", entity.IndexType(b.opt.IndexType), map[string]string{
		"metric_type": b.opt.Metric, "params": b.opt.IndexParams})
	if err := b.c.CreateIndex(ctx, coll, vectorField, idx, false); err != nil {
		return false, fmt.Errorf("milvus collection %q: create %s index: %w", coll, b.opt.IndexType, err)
	}
	return true, nil
}

// loadRetry is how long load keeps trying: a Milvus that just (re)started answers health
// checks before its query coordinator can load.
const loadRetry = 2 * time.Minute

// load loads the collection, retrying for up to loadRetry.
func (b *builder) load(ctx context.Context) error {
	deadline := time.Now().Add(loadRetry)
	for {
		err := load(ctx, b.c, b.opt.Collection)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("load milvus collection %q: %w", b.opt.Collection, err)
		}
		fmt.Fprintf(b.opt.Log, "needle build: load milvus collection %q: %v; retrying\n", b.opt.Collection, err)
		time.Sleep(2 * time.Second)
	}
}

// other says how the existing collection differs from this build ("" = it is this build).
func (b *builder) other(ctx context.Context) string {
	info, err := describe(ctx, b.c, b.opt.URI, b.opt.Collection)
	switch {
	case err != nil:
		return err.Error()
	case info.desc == nil:
		return "not made by needle build"
	case *info.desc != b.want:
		return fmt.Sprintf("built for %s, this build is %s", info.desc, b.want)
	}
	idx, err := b.c.DescribeIndex(ctx, b.opt.Collection, vectorField)
	if err != nil || len(idx) == 0 {
		return fmt.Sprintf("no vector index (%v)", err)
	}
	p := idx[0].Params()
	if string(idx[0].IndexType()) != b.opt.IndexType || p["metric_type"] != b.opt.Metric || !sameJSON(p["params"], b.opt.IndexParams) {
		return fmt.Sprintf("index %s %s %s, this build asks for %s %s %s",
			idx[0].IndexType(), p["metric_type"], p["params"], b.opt.IndexType, b.opt.Metric, b.opt.IndexParams)
	}
	return ""
}

// sameJSON reports whether a and b are equal JSON objects once numbers and strings are
// compared as text (Milvus echoes {"M":16} back as {"M":"16"}).
func sameJSON(a, b string) bool {
	norm := func(s string) map[string]string {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	x, y := norm(a), norm(b)
	if x == nil || y == nil || len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if y[k] != v {
			return false
		}
	}
	return true
}

// resumeAt returns the row to insert from: the length of the longest prefix 0..r-1 the
// collection holds in full. Rows at or past r (from inserts that were cut short or ran
// out of order) are deleted first, so no row is ever inserted twice.
func (b *builder) resumeAt(ctx context.Context) (int64, error) {
	coll := b.opt.Collection
	total, err := count(ctx, b.c, coll, "")
	if err != nil || total == 0 {
		return 0, wrapf(err, "milvus collection %q: count rows", coll)
	}
	// A prefix 0..r-1 is complete when it holds r rows (primary keys are never repeated).
	complete := func(r int64) (bool, error) {
		n, err := count(ctx, b.c, coll, fmt.Sprintf("%s < %d", rowField, r))
		return n == r, err
	}
	r := min(total, b.want.Rows)
	if ok, err := complete(r); err != nil {
		return 0, wrapf(err, "milvus collection %q: count rows", coll)
	} else if !ok {
		lo, hi := int64(0), r // complete(lo) holds, complete(hi) does not
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			ok, err := complete(mid)
			if err != nil {
				return 0, wrapf(err, "milvus collection %q: count rows", coll)
			}
			if ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		r = lo
	}
	return r, b.deleteFrom(ctx, r)
}

// wrapf wraps a non-nil err with the context of the format; nil stays nil.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// deleteFrom deletes the rows with primary key >= r.
func (b *builder) deleteFrom(ctx context.Context, r int64) error {
	coll := b.opt.Collection
	for {
		res, err := b.c.Query(ctx, coll, nil, fmt.Sprintf("%s >= %d", rowField, r), []string{rowField},
			client.WithSearchQueryConsistencyLevel(entity.ClStrong), client.WithLimit(16384))
		if err != nil {
			return fmt.Errorf("milvus collection %q: rows past %d: %w", coll, r, err)
		}
		ids := res.GetColumn(rowField)
		if ids == nil || ids.Len() == 0 {
			return nil
		}
		fmt.Fprintf(b.opt.Log, "needle build: deleting %d rows past row %d (an insert cut short)\n", ids.Len(), r)
		if err := b.c.DeleteByPks(ctx, coll, "", ids); err != nil {
			return fmt.Errorf("milvus collection %q: delete rows past %d: %w", coll, r, err)
		}
	}
}

// insert sends rows [start, n) in requests of at most opt.InsertBytes, opt.Inserts of them
// in flight, while the next batches are read. Requests may complete out of order: a resume
// finds the complete prefix (resumeAt).
func (b *builder) insert(ctx context.Context, start int64) error {
	n, dim := b.vecs.Len(), b.vecs.Dim()
	rows := int64(max(1, b.opt.InsertBytes/(4*dim)))
	bar := progress.Start(b.opt.Log, progress.Options{Label: "rows inserted into milvus", Total: n, Done: start})
	defer bar.Finish()
	type batch struct {
		lo  int64
		buf []float32
	}
	free := make(chan []float32, b.opt.Inserts+1)
	for range b.opt.Inserts + 1 {
		free <- make([]float32, rows*int64(dim))
	}
	ready := make(chan batch)
	ctx, cancel := context.WithCancel(ctx) // the first failure stops the reader and the others
	defer cancel()
	errs := make(chan error, b.opt.Inserts+1)
	go func() {
		defer close(ready)
		for lo := start; lo < n; lo += rows {
			var buf []float32
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			buf = buf[:min(rows, n-lo)*int64(dim)]
			if err := b.vecs.Read(lo, buf); err != nil {
				errs <- fmt.Errorf("read vectors: %w", err)
				cancel()
				return
			}
			select {
			case ready <- batch{lo, buf}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range b.opt.Inserts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]int64, rows)
			vecs := make([][]float32, rows)
			for bt := range ready {
				m := len(bt.buf) / dim
				for i := range m {
					ids[i] = bt.lo + int64(i)
					vecs[i] = bt.buf[i*dim : (i+1)*dim]
				}
				_, err := b.c.Insert(ctx, b.opt.Collection, "",
					entity.NewColumnInt64(rowField, ids[:m]), entity.NewColumnFloatVector(vectorField, dim, vecs[:m]))
				if err != nil {
					errs <- fmt.Errorf("insert rows %d..%d into milvus collection %q: %w (rerun the same command to resume)",
						bt.lo, bt.lo+int64(m)-1, b.opt.Collection, err)
					cancel()
					return
				}
				bar.Add(int64(m))
				free <- bt.buf[:cap(bt.buf)]
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// bulkBytes bounds the vectors of one bulk import task (its files and Milvus's work). Smaller
// tasks cost Milvus more: 100k 768-dim rows took it 5.2-5.7 CPU-s as one task, 8.8-9.8 in
// 64 MiB tasks and 18.6 in 16 MiB ones.
const bulkBytes = 1 << 30

// bulkImport sends rows [start, n) by bulk import tasks of up to bulkBytes of vectors, one
// after the other: each writes its NumPy files, has Milvus import them and waits for it. A
// failed task is cleaned up by Milvus; the rerun resumes after the rows of finished tasks.
func (b *builder) bulkImport(ctx context.Context, start int64) error {
	n, dim := b.vecs.Len(), b.vecs.Dim()
	dir, err := os.MkdirTemp(b.opt.BulkDir, "needle-bulk-")
	if err != nil {
		return fmt.Errorf("bulk import folder: %w", err)
	}
	defer os.RemoveAll(dir)
	bar := progress.Start(b.opt.Log, progress.Options{Label: "rows imported into milvus", Total: n, Done: start})
	defer bar.Finish()
	chunk := int64(max(1, bulkBytes/(4*dim)))
	buf := make([]float32, max(1, b.opt.InsertBytes/(4*dim))*dim)
	for lo := start; lo < n; lo += chunk {
		m := min(chunk, n-lo)
		rows, vectors := filepath.Join(dir, rowField+".npy"), filepath.Join(dir, vectorField+".npy")
		ids := make([]int64, m)
		for i := range ids {
			ids[i] = lo + int64(i)
		}
		err := writeNpy(rows, npy.Header("<i8", m), func(w io.Writer) error { return binary.Write(w, binary.LittleEndian, ids) })
		if err == nil {
			err = writeNpy(vectors, npy.Header("<f4", m, int64(dim)), func(w io.Writer) error {
				for at := lo; at < lo+m; {
					x := buf[:min(int64(len(buf)/dim), lo+m-at)*int64(dim)]
					if err := b.vecs.Read(at, x); err != nil {
						return fmt.Errorf("read vectors: %w", err)
					}
					if err := binary.Write(w, binary.LittleEndian, x); err != nil {
						return err
					}
					at += int64(len(x) / dim)
				}
				return nil
			})
		}
		if err != nil {
			return fmt.Errorf("bulk import files in %s: %w", dir, err)
		}
		if err := b.importFiles(ctx, rows, vectors); err != nil {
			return fmt.Errorf("bulk import rows %d..%d into milvus collection %q: %w (rerun the same command to resume)",
				lo, lo+m-1, b.opt.Collection, err)
		}
		bar.Add(m)
	}
	return nil
}

// importFiles runs one bulk import task of the files and waits until Milvus finished it.
func (b *builder) importFiles(ctx context.Context, files ...string) error {
	id, err := b.c.BulkInsert(ctx, b.opt.Collection, "", files)
	if err != nil {
		return err
	}
	for {
		st, err := b.c.GetBulkInsertState(ctx, id)
		if err != nil {
			return err
		}
		switch st.State {
		case entity.BulkInsertCompleted:
			return nil
		case entity.BulkInsertFailed, entity.BulkInsertFailedAndCleaned:
			return fmt.Errorf("import task %d failed: %s", id, st.Infos["failed_reason"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeNpy writes a .npy file: header, then what data writes (buffered).
func writeNpy(path string, header []byte, data func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	w.Write(header)
	if err := data(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// finish flushes the inserted rows into sealed segments and waits until the index covers
// all of them.
func (b *builder) finish(ctx context.Context) error {
	coll := b.opt.Collection
	if err := b.c.Flush(ctx, coll, false); err != nil {
		return fmt.Errorf("flush milvus collection %q: %w", coll, err)
	}
	svc := b.c.(*client.GrpcClient).Service
	var bar *progress.Bar
	defer func() {
		if bar != nil {
			bar.Finish()
		}
	}()
	for {
		resp, err := svc.DescribeIndex(ctx, &milvuspb.DescribeIndexRequest{CollectionName: coll, FieldName: vectorField})
		if err == nil {
			err = statusError(resp.GetStatus())
		}
		if err != nil {
			return fmt.Errorf("milvus collection %q: index state: %w", coll, err)
		}
		if len(resp.GetIndexDescriptions()) == 0 {
			return fmt.Errorf("milvus collection %q has no vector index", coll)
		}
		d := resp.GetIndexDescriptions()[0]
		if bar == nil {
			bar = progress.Start(b.opt.Log, progress.Options{Label: "rows indexed by milvus", Total: d.GetTotalRows()})
		}
		bar.Set(d.GetIndexedRows())
		switch d.GetState() {
		case commonpb.IndexState_Failed:
			return fmt.Errorf("milvus collection %q: index build failed: %s", coll, d.GetIndexStateFailReason())
		case commonpb.IndexState_Finished:
			if d.GetIndexedRows() >= d.GetTotalRows() && d.GetPendingIndexRows() == 0 {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}
