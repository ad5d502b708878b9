package engine

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"needle/docstore"
	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/bm25"
	"needle/index/compact"
	"needle/index/flat"
	"needle/index/flatgpu"
	"needle/index/indexdir"
	"needle/index/milvusindex"
	"needle/internal/option"
	"needle/internal/writer"
)

// Index backends (Options.Backend), each one case of OpenIndex.
const (
	// BackendAuto (or "") picks BackendMapped for flat index files, BackendFAISS for the rest.
	BackendAuto = "auto"
	// BackendFAISS loads the index file into RAM with FAISS and searches it on the CPU.
	BackendFAISS = "faiss"
	// BackendMapped maps a flat index file's vectors in place (index/flat): ready at
	// once, memory independent of the index size, an exact pass over the file per batch.
	BackendMapped = "mapped"
	// BackendGPU is what IndexBackend reports when --gpu put a flat index on the GPUs
	// (index/flatgpu); it is chosen by Options.GPU, not by Backend.
	BackendGPU = "gpu"
	// BackendMilvus searches a Milvus collection (standalone or cluster) over gRPC
	// (index/milvusindex); Options.Milvus says which.
	BackendMilvus = "milvus"
	// BackendCompact serves a compact form folder made by `needle convert`
	// (index/compact): FAISS codes in RAM, candidates re-scored exactly from the mapped
	// source's fp32 rows.
	BackendCompact = "compact"
)

// The values of Options.GPU besides "": bert's modes, which the index and the encoder share.
const (
	GPUAuto    = bert.GPUAuto
	GPURequire = bert.GPURequire
)

// maxQueryTokens is the encoder's sequence length for queries, specials included.
const maxQueryTokens = 256

// Options say what Open serves; their Specs (options.go) declare `needle serve`'s flags of
// them and the defaults (option.Defaults). An error of one option is an *option.Error naming
// its field.
type Options struct {
	// Index is a `needle build` output folder (with manifest.json), a `needle convert` form
	// folder (with compact.json) or a bare index file; with BackendMilvus, an optional build
	// folder whose manifest names corpus and model.
	Index string
	// Backend is the index implementation: BackendAuto ("" too), BackendFAISS, BackendMapped,
	// BackendCompact or BackendMilvus.
	Backend string
	Corpus  string // corpus JSONL, line i = index row i ("": the manifest's corpus)
	Pages   string // pages JSONL with a "url" per row, for Access ("": none)
	Model   string // encoder model folder ("": the manifest's model)
	Pooling string // encoder pooling, "mean" or "cls" ("": the manifest's, else the model's)
	// Milvus is the collection BackendMilvus searches.
	Milvus milvusindex.Options
	// RetrieverName is the anchors' model name; one containing "e5" means e5's query prefix.
	RetrieverName string
	// QueryPrefix is prepended to every query before encoding. nil guesses it: "query: " for
	// e5 models (RetrieverName, or a manifest whose passage prefix is "passage: "), else none.
	QueryPrefix *string
	// Precision is the query encoder's Linear precision ("": the manifest's, else fp16); one
	// other than the manifest's is an error unless ForcePrecision.
	Precision      string
	ForcePrecision bool
	Threads        int  // encoder and index threads (0 = all cores)
	Mmap           bool // map IVF inverted lists from the index file instead of loading them
	// Nprobe is the IVF lists visited per query of an IVF index or compact form (0: the
	// form's, else FAISS's default of 1); Rescore the candidates a compact form re-scores per
	// query (0: the form's; < 0: none).
	Nprobe, Rescore int
	// GPU asks for the GPU flat index (index/flatgpu) instead of FAISS on the CPU:
	// "" no, GPUAuto when a GPU, cuBLAS and enough memory are there (else one line to Log
	// says why and the CPU index serves), GPURequire the same but failing instead. The query
	// encoder runs on the first of GPUs in the same mode (bert.LoadOn).
	GPU     string
	GPUs    []int     // ordinals of the visible GPUs to shard rows over (nil: all)
	GPUFP32 bool      // keep fp32 vectors on the GPU (twice the memory of fp16)
	Log     io.Writer // one-line notices (the GPU fallback) and the GPU load's progress; nil: discarded
	// Batcher bounds the batches; its MaxBatch is also the encoder's batch size.
	Batcher BatcherOptions
	// CacheBytes is the result cache's budget (0: no cache; see Retriever.WithCache).
	CacheBytes int64
	// BM25 is a BM25 index folder (`needle build --bm25`) of the same corpus served beside the
	// dense index: hybrid retrieval, fused as Fusion says. An Index that is a BM25 folder alone
	// (or RetrieverName "bm25") serves BM25 without an encoder instead.
	BM25   string
	Fusion FusionOptions
	// RerankModel is a cross-encoder folder (HF BertForSequenceClassification, one logit):
	// /retrieve then answers Search-R1's retrieve-then-rerank contract and /rerank is served.
	RerankModel string
	RerankBatch int // pairs per cross-encoder pass (0: 32, Search-R1's)
}

// Resolve returns opts completed from the build manifest when Index is a folder: Index
// becomes the index file, and the corpus, model and pooling the flags left out come from
// the manifest; QueryPrefix is guessed when nil. A compact form folder stays the Index, and
// its manifest is that of the build folder it was converted from, if any. It refuses fusion
// options out of range and a bare index file without a corpus and a model (Open checks the
// rest: Check).
// Resolving twice changes nothing.
func Resolve(opts Options) (Options, error) {
	if err := opts.Fusion.check(); err != nil { // before anything loads
		return opts, err
	}
	if servesBM25Alone(opts) { // no model: the corpus defaults to the one the index was built from
		_, err := bm25.ReadMeta(opts.Index)
		if err != nil {
			return opts, option.Wrap("Index", err)
		}
		if opts.QueryPrefix == nil {
			opts.QueryPrefix = new(string)
		}
		return opts, nil
	}
	var manifest *indexdir.Manifest
	if opts.Backend == BackendMilvus && opts.Index == "" {
		// The collection is the index: corpus and model come from the flags.
	} else if info, err := os.Stat(opts.Index); err != nil {
		return opts, option.Wrap("Index", err)
	} else if info.IsDir() && compact.IsForm(opts.Index) {
		form, err := compact.ReadForm(opts.Index)
		if err != nil {
			return opts, option.Wrap("Index", err)
		}
		if m, err := indexdir.ReadManifest(filepath.Dir(form.Source.Path)); err == nil && m.IndexFile == filepath.Base(form.Source.Path) {
			if manifest, err = fromManifest(&opts, m); err != nil {
				return opts, err
			}
		}
	} else if info.IsDir() {
		m, err := indexdir.ReadManifest(opts.Index)
		if err != nil {
			return opts, option.Wrap("Index", err)
		}
		opts.Index = filepath.Join(opts.Index, m.IndexFile)
		if manifest, err = fromManifest(&opts, m); err != nil {
			return opts, err
		}
	}
	if opts.Corpus == "" {
		return opts, option.Errorf("Corpus", "required with a bare index file")
	}
	if opts.Model == "" {
		return opts, option.Errorf("Model", "required: the index has no manifest naming its model")
	}
	if opts.QueryPrefix == nil {
		prefix := ""
		if strings.Contains(strings.ToLower(opts.RetrieverName), "e5") || (manifest != nil && manifest.Prefix == "passage: ") {
			prefix = "query: "
		}
		opts.QueryPrefix = &prefix
	}
	return opts, nil
}

// fromManifest fills the corpus, model, pooling and precision opts leaves out from a build
// manifest, and returns it.
func fromManifest(opts *Options, m *indexdir.Manifest) (*indexdir.Manifest, error) {
	opts.Corpus = cmp.Or(opts.Corpus, m.Corpus.Path)
	opts.Model = cmp.Or(opts.Model, m.Model)
	opts.Pooling = cmp.Or(opts.Pooling, m.Pooling)
	var err error
	if opts.Precision, err = m.QueryPrecision(opts.Precision, opts.ForcePrecision); err != nil {
		return nil, option.Wrap("Index", err)
	}
	return m, nil
}

// Open resolves opts, loads the index, corpus, pages and encoder at the same time (the slow
// parts are reading the index file and building the corpus offsets sidecar on first use),
// checks that they agree and starts the Batcher. Close releases it all.
func Open(opts Options) (*Retriever, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if servesBM25Alone(opts) {
		return withReranker(openBM25Alone(opts))(opts)
	}
	opts, err := Resolve(opts)
	if err != nil {
		return nil, err
	}
	opts.Log = &writer.Locked{W: writer.OrDiscard(opts.Log)} // the index and the encoder load in parallel
	var (
		idx    Index
		corpus *docstore.Corpus
		pages  *docstore.Pages
		enc    *bert.Encoder
		wg     sync.WaitGroup
	)
	errs, closers := make([]error, 4), make([]func(), 4)
	run := func(i int, field string, open func() (func(), error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			closers[i], errs[i] = open()
			errs[i] = option.Wrap(field, errs[i])
		}()
	}
	var backend string
	indexField := "Index"
	if opts.Backend == BackendMilvus {
		indexField = "Milvus.URI"
	}
	run(0, indexField, func() (close func(), err error) {
		idx, backend, close, err = OpenIndex(opts)
		return close, err
	})
	run(1, "Corpus", func() (func(), error) {
		c, err := docstore.OpenCorpus(opts.Corpus, docstore.Options{})
		corpus = c
		return closeFunc(c, err)
	})
	if opts.Pages != "" {
		run(2, "Pages", func() (func(), error) {
			p, err := docstore.OpenPages(opts.Pages, docstore.Options{})
			pages = p
			return closeFunc(p, err)
		})
	}
	run(3, "Model", func() (_ func(), err error) {
		// With GPU set, queries are encoded on the first of GPUs too (bert.LoadOn: same modes).
		enc, err = bert.LoadOn(opts.Model, bert.Options{
			MaxLength: maxQueryTokens, BatchSize: opts.Batcher.MaxBatch, Threads: opts.Threads, Pooling: opts.Pooling,
			Precision: bert.Precision(opts.Precision)}, opts.GPU, firstOr(opts.GPUs, 0), opts.Log)
		if err != nil {
			return nil, err
		}
		return func() { enc.Close() }, nil
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(closers)
		return nil, err
	}
	if (backend == BackendMapped || backend == BackendGPU) && opts.Batcher.MaxSearchBatch == 0 {
		// Each mapped or GPU search reads the whole matrix once: let one pass serve every
		// query encoded meanwhile (FAISS's own query block for flat search is 4096; the GPU
		// index leaves room for batches of 4096).
		opts.Batcher.MaxSearchBatch = 4096
	}
	var ps PageStore
	if pages != nil {
		ps = pages
	}
	r, err := NewRetriever(enc, idx, corpus, ps, *opts.QueryPrefix, opts.Batcher)
	if err != nil {
		closeAll(closers)
		return nil, fmt.Errorf("%s with %s and %s: %w", opts.IndexName(), opts.Corpus, opts.Model, err)
	}
	r.closers, r.backend = closers, backend
	if opts.BM25 != "" {
		if err := r.withBM25(opts); err != nil {
			r.Close()
			return nil, err
		}
	}
	return withReranker(r.WithCache(opts.CacheBytes), nil)(opts)
}

// IndexName names what opts serves as index, for messages: the index file, or the Milvus
// collection.
func (opts Options) IndexName() string {
	if opts.Backend == BackendMilvus {
		return fmt.Sprintf("milvus collection %q at %s", opts.Milvus.Collection, opts.Milvus.URI)
	}
	return opts.Index
}

// OpenIndex opens the index of resolved opts with the backend opts.Backend names (or the GPU
// flat index when opts.GPU asks for it and it loads) and returns the backend it used. Each
// backend is one case here, so another index (a Milvus collection) plugs in beside these
// without touching the server or the command line. `needle bench index` opens indexes here
// too, as served.
func OpenIndex(opts Options) (Index, string, func(), error) {
	if opts.GPU != "" && opts.Backend != BackendMilvus {
		x, err := openGPU(opts)
		if err != nil {
			return nil, "", nil, err
		}
		if x != nil {
			return x, BackendGPU, x.Close, nil
		}
	}
	backend := opts.Backend
	if backend == "" || backend == BackendAuto {
		// A flat file loaded by FAISS needs RAM = its size (64.6 GB for wiki-18) and minutes
		// to read; mapped, it is ready at once and searched with FAISS's exact answers.
		backend = BackendFAISS
		if compact.IsForm(opts.Index) {
			backend = BackendCompact
		} else if _, err := faissgo.StatFlat(opts.Index); err == nil {
			backend = BackendMapped
		}
	}
	switch backend {
	case BackendFAISS:
		faissgo.Init(opts.Threads)
		x, err := faissgo.Read(opts.Index, opts.Mmap)
		if err == nil && opts.Nprobe > 0 {
			if err = x.SetSearchParam("nprobe", float64(opts.Nprobe)); err != nil {
				x.Close()
			}
		}
		if err != nil {
			return nil, "", nil, err
		}
		return x, backend, x.Close, nil
	case BackendCompact:
		x, err := compact.Open(opts.Index, compact.Options{Threads: opts.Threads, Mmap: opts.Mmap, Rescore: opts.Rescore, Nprobe: opts.Nprobe})
		if err != nil {
			return nil, "", nil, err
		}
		return x, backend, x.Close, nil
	case BackendMapped:
		x, err := flat.Open(opts.Index, opts.Threads)
		if err != nil {
			return nil, "", nil, err
		}
		return x, backend, x.Close, nil
	case BackendMilvus:
		x, err := milvusindex.Open(opts.Milvus)
		if err != nil {
			return nil, "", nil, err
		}
		return x, backend, x.Close, nil
	}
	return nil, "", nil, fmt.Errorf("unknown index backend %q (this build has %q, %q, %q, %q and %q)", opts.Backend, BackendAuto, BackendFAISS, BackendMapped, BackendCompact, BackendMilvus)
}

// openGPU loads the GPU flat index, or returns nil, nil after one line to opts.Log saying why
// the CPU index serves instead (GPUAuto), or an error (GPURequire).
func openGPU(opts Options) (*flatgpu.Index, error) {
	log := writer.OrDiscard(opts.Log)
	x, err := flatgpu.Load(opts.Index, flatgpu.Options{Devices: opts.GPUs, FP32: opts.GPUFP32, Progress: log})
	switch {
	case err == nil:
		fmt.Fprintf(log, "needle: GPU index: %d vectors on %v\n", x.Ntotal(), x.Stats().Devices)
		return x, nil
	case opts.GPU == GPURequire:
		return nil, fmt.Errorf("GPU index required: %w", err)
	}
	fmt.Fprintf(log, "needle: not using a GPU, serving on the CPU: %v\n", err)
	return nil, nil
}

// firstOr is the first of xs, or def when there is none.
func firstOr(xs []int, def int) int {
	if len(xs) == 0 {
		return def
	}
	return xs[0]
}

// closeAll calls the closers that are set (the parts that opened when a load failed).
func closeAll(closers []func()) {
	for _, c := range closers {
		if c != nil {
			c()
		}
	}
}

// closeFunc returns c's Close when opening c succeeded.
func closeFunc(c interface{ Close() error }, err error) (func(), error) {
	if err != nil {
		return nil, err
	}
	return func() { c.Close() }, nil
}
