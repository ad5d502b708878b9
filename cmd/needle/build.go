package main

import (
	"errors"
	"fmt"
	"os"

	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/bm25"
	"needle/index/milvusindex"
	"needle/indexbuild"
	"needle/internal/buildinfo"
)

func init() {
	register(command{name: "build", summary: "corpus JSONL -> embeddings -> FAISS index folder, or -> BM25 index with --bm25 (resumable)", run: runBuild})
}

func runBuild(args []string) error {
	fs := newFlagSet("build", "--corpus C.jsonl --model DIR --out DIR [flags]")
	var cfg indexbuild.Config
	fs.StringVar(&cfg.Corpus, "corpus", "", "corpus JSONL, one {\"id\", \"contents\": \"\\\"Title\\\"\\ntext\", ...} per line; line i becomes index row i (required)")
	fs.StringVar(&cfg.Model, "model", "", "encoder model folder (config.json, model.safetensors, vocab.txt/tokenizer.json); required unless --embeddings")
	fs.StringVar(&cfg.Out, "out", "", "output folder: index.faiss, manifest.json, corpus offsets sidecar, optional emb.memmap; partial/ holds shards while building (required)")
	fs.StringVar(&cfg.Factory, "factory", "Flat", "FAISS index_factory string: Flat (exact, as the anchors' e5_Flat.index), HNSW32, IVF4096,Flat, IVF4096,SQ8, ...")
	metric := fs.String("metric", "ip", "ip (inner product = cosine on normalized embeddings) or l2")
	fs.IntVar(&cfg.MaxLength, "max-length", 256, "tokens per passage, [CLS] and [SEP] included (right truncation)")
	fs.StringVar(&cfg.Prefix, "prefix", "passage: ", "text prepended to every passage before encoding (e5: \"passage: \"; MiniLM/bge: \"\")")
	fs.StringVar(&cfg.Pooling, "pooling", "", "mean or cls (default: the model's 1_Pooling/config.json, else mean)")
	batch := fs.Int("batch-size", 64, "passages per encoder forward pass (length-sorted within each chunk of --encode-rows)")
	precision := fs.String("precision", "fp16", bert.PrecisionHelp+" (recorded in the manifest; serve encodes queries at it; ignored with --embeddings)")
	threads := fs.Int("threads", 0, "CPU threads for encoding and FAISS (0 = all cores)")
	fs.StringVar(&cfg.Embeddings, "embeddings", "", "index existing embeddings instead of encoding: a headerless float32 N x dim memmap (the anchors' emb_e5.memmap) or a float32 .npy")
	fs.IntVar(&cfg.Dim, "dim", 0, "embedding width of a headerless --embeddings file (default: dimension from a manifest.json beside it)")
	fs.IntVar(&cfg.TrainSize, "train-size", 0, "rows sampled to train IVF/PQ/SQ factories (0 = min(rows, 100000)); ignored by Flat and HNSW")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the --train-size sample")
	fs.Int64Var(&cfg.ShardRows, "shard-rows", indexbuild.DefaultShardRows, "rows per embeddings shard: the most work an interruption loses")
	fs.IntVar(&cfg.EncodeRows, "encode-rows", 512, "passages handed to the encoder at once (it sorts them by length into batches); the progress bar moves per chunk")
	fs.BoolVar(&cfg.SaveEmbeddings, "save-embeddings", false, "also write emb.memmap (headerless float32 N x dim, like the anchors' emb_e5.memmap)")
	fs.BoolVar(&cfg.Restart, "restart", false, "discard a partial or finished build of other arguments in --out (or --collection) instead of refusing")
	var mv milvusindex.BuildOptions
	fs.StringVar(&mv.URI, "milvus", "", "insert the vectors into a Milvus collection at this URI (host:port or http(s)://host:port; standalone or cluster)\n"+
		"instead of writing a FAISS index; --out then only holds the encoder's resumable shards (not needed with --embeddings)")
	fs.StringVar(&mv.Collection, "collection", "", "with --milvus: the collection (created with primary key row = corpus line, and the index); a rerun resumes it")
	fs.StringVar(&mv.IndexType, "milvus-index", "HNSW", "with --milvus: Milvus index type: HNSW, IVF_FLAT, IVF_SQ8, IVF_PQ, FLAT, ...")
	fs.StringVar(&mv.BulkDir, "milvus-bulk-dir", "", "with --milvus: send the rows by Milvus's bulk import, as NumPy files written under this folder, which Milvus must\n"+
		"read at the same path (a standalone Milvus on this machine); several times the rows/s of insert requests")
	fs.StringVar(&mv.IndexParams, "milvus-index-params", "", "with --milvus: index build parameters as Milvus's JSON (default HNSW {\"M\":16,\"efConstruction\":256}, IVF {\"nlist\":1024})")
	sparse := fs.Bool("bm25", false, "build a BM25 index (Lucene's BM25 and pyserini's English analyzer; no model) into --out instead: bm25.json and its files")
	bm25MB := fs.Int64("bm25-memory-mb", bm25.DefaultMemoryBytes>>20, "with --bm25: postings held in memory before a sorted run is written (and checkpointed)")
	load := gpuEncoderFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *sparse && fs.NArg() == 0 && cfg.Corpus != "" && cfg.Out != "":
		return bm25.Build(bm25.BuildConfig{Corpus: cfg.Corpus, Out: cfg.Out, MemoryBytes: *bm25MB << 20, Threads: *threads,
			Restart: cfg.Restart, Version: buildinfo.Version(), Log: os.Stderr})
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	case mv.URI != "":
		if mv.Collection == "" || cfg.Corpus == "" || (cfg.Out == "" && cfg.Embeddings == "") {
			return errors.New("--milvus needs --collection, --corpus, and --out (the encoder's shards) unless --embeddings gives the vectors (see --help)")
		}
	case cfg.Corpus == "" || cfg.Out == "":
		return errors.New("--corpus and --out are required (see --help)")
	case cfg.Model == "" && cfg.Embeddings == "":
		return errors.New("--model is required unless --embeddings gives the vectors (see --help)")
	case cfg.Pooling != "" && cfg.Pooling != "mean" && cfg.Pooling != "cls":
		return fmt.Errorf("--pooling %q: want mean or cls", cfg.Pooling)
	}
	m, err := faissgo.ParseMetric(*metric)
	if err != nil {
		return fmt.Errorf("--metric: %w", err)
	}
	cfg.Metric = map[faissgo.Metric]string{faissgo.IP: "ip", faissgo.L2: "l2"}[m]
	cfg.Normalize, cfg.Version, cfg.Log = true, buildinfo.Version(), os.Stderr
	job := indexbuild.Job{Config: cfg, Metric: m, LoadEncoder: load,
		Encoder: bert.Options{BatchSize: *batch, Threads: *threads, Precision: bert.Precision(*precision)}}
	if mv.URI != "" {
		job.Milvus = &mv
	}
	return job.Run()
}
