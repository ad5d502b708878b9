package indexbuild

import (
	"errors"

	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/bm25"
	"needle/internal/option"
)

// Specs declares the options of one build (`needle build`'s flags of them); Run and Embed
// refuse what they do not take.
func (c *Config) Specs() option.Specs {
	return option.Specs{
		option.String(&c.Corpus, "Corpus", "corpus", "", "corpus JSONL, one {\"id\", \"contents\": \"\\\"Title\\\"\\ntext\", ...} per line; line i becomes index row i (required)"),
		option.String(&c.Model, "Model", "model", "", "encoder model folder (config.json, model.safetensors, vocab.txt/tokenizer.json); required unless --embeddings"),
		option.String(&c.Out, "Out", "out", "", "output folder: index.faiss, manifest.json, corpus offsets sidecar, optional emb.memmap; partial/ holds shards while building (required)"),
		option.String(&c.Factory, "Factory", "factory", "Flat", "FAISS index_factory string: Flat (exact, as the anchors' e5_Flat.index), HNSW32, IVF4096,Flat, IVF4096,SQ8, ..."),
		option.String(&c.Metric, "Metric", "metric", "ip", "ip (inner product = cosine on normalized embeddings) or l2"),
		option.Num(&c.MaxLength, "MaxLength", "max-length", 256, option.Above(0), "tokens per passage, [CLS] and [SEP] included (right truncation)"),
		option.String(&c.Prefix, "Prefix", "prefix", "passage: ", "text prepended to every passage before encoding (e5: \"passage: \"; MiniLM/bge: \"\")"),
		option.String(&c.Pooling, "Pooling", "pooling", "", "mean or cls (default: the model's 1_Pooling/config.json, else mean)"),
		option.String(&c.Embeddings, "Embeddings", "embeddings", "", "index existing embeddings instead of encoding: a headerless float32 N x dim memmap (the anchors' emb_e5.memmap) or a float32 .npy"),
		option.Num(&c.Dim, "Dim", "dim", 0, option.From(0), "embedding width of a headerless --embeddings file (default: dimension from a manifest.json beside it)"),
		option.Num(&c.TrainSize, "TrainSize", "train-size", 0, option.From(0), "rows sampled to train IVF/PQ/SQ factories (0 = min(rows, 100000)); ignored by Flat and HNSW"),
		option.Num(&c.Seed, "Seed", "seed", 0, option.Any, "seed of the --train-size sample"),
		option.Num(&c.ShardRows, "ShardRows", "shard-rows", DefaultShardRows, option.Above(0), "rows per embeddings shard: the most work an interruption loses"),
		option.Num(&c.EncodeRows, "EncodeRows", "encode-rows", 512, option.Above(0), "passages handed to the encoder at once (it sorts them by length into batches); the progress bar moves per chunk"),
		option.Bool(&c.SaveEmbeddings, "SaveEmbeddings", "save-embeddings", false, "also write emb.memmap (headerless float32 N x dim, like the anchors' emb_e5.memmap)"),
		option.Bool(&c.Restart, "Restart", "restart", false, "discard a partial or finished build of other arguments in --out (or --collection) instead of refusing"),
	}
}

// Specs declares the options of the job: its Config's, the encoder's, Milvus's and BM25's.
func (j *Job) Specs() option.Specs {
	s := append(j.Config.Specs(),
		option.Num(&j.Encoder.BatchSize, "Encoder.BatchSize", "batch-size", 64, option.Above(0), "passages per encoder forward pass (length-sorted within each chunk of --encode-rows)"),
		option.String((*string)(&j.Encoder.Precision), "Encoder.Precision", "precision", "fp16", bert.PrecisionHelp+" (recorded in the manifest; serve encodes queries at it; ignored with --embeddings)"),
		option.Num(&j.Encoder.Threads, "Encoder.Threads", "threads", 0, option.From(0), "CPU threads for encoding and FAISS (0 = all cores)"),
		option.String(&j.Milvus.URI, "Milvus.URI", "milvus", "", "insert the vectors into a Milvus collection at this URI (host:port or http(s)://host:port; standalone or cluster)\n"+
			"instead of writing a FAISS index; --out then only holds the encoder's resumable shards (not needed with --embeddings)"),
		option.String(&j.Milvus.Collection, "Milvus.Collection", "collection", "", "with --milvus: the collection (created with primary key row = corpus line, and the index); a rerun resumes it"),
		option.String(&j.Milvus.IndexType, "Milvus.IndexType", "milvus-index", "HNSW", "with --milvus: Milvus index type: HNSW, IVF_FLAT, IVF_SQ8, IVF_PQ, FLAT, ..."),
		option.String(&j.Milvus.BulkDir, "Milvus.BulkDir", "milvus-bulk-dir", "", "with --milvus: send the rows by Milvus's bulk import, as NumPy files written under this folder, which Milvus must\n"+
			"read at the same path (a standalone Milvus on this machine); several times the rows/s of insert requests"),
		option.String(&j.Milvus.IndexParams, "Milvus.IndexParams", "milvus-index-params", "", "with --milvus: index build parameters as Milvus's JSON (default HNSW {\"M\":16,\"efConstruction\":256}, IVF {\"nlist\":1024})"),
		option.Bool(&j.BM25, "BM25", "bm25", false, "build a BM25 index (Lucene's BM25 and pyserini's English analyzer; no model) into --out instead: bm25.json and its files"),
		option.MiB(&j.BM25MemoryBytes, "BM25MemoryBytes", "bm25-memory-mb", bm25.DefaultMemoryBytes, option.Above(0), "with --bm25: postings held in memory before a sorted run is written (and checkpointed), in `MiB`"),
	)
	return s
}

// Check refuses what the specs do not take and what the kind of build needs but lacks.
func (j Job) Check() error {
	required := func(fields ...string) error {
		var errs []error
		for _, f := range fields {
			v := map[string]string{"Corpus": j.Corpus, "Out": j.Out, "Model": j.Model, "Milvus.Collection": j.Milvus.Collection}[f]
			errs = append(errs, option.Required(f, v))
		}
		return errors.Join(errs...)
	}
	var need error
	switch {
	case j.BM25:
		need = required("Corpus", "Out")
	case j.Milvus.URI != "" && j.Embeddings != "":
		need = required("Corpus", "Milvus.Collection")
	case j.Milvus.URI != "":
		need = required("Corpus", "Out", "Milvus.Collection")
	case j.Embeddings != "":
		need = required("Corpus", "Out")
	default:
		need = required("Corpus", "Out", "Model")
	}
	var pooling, metric error
	if j.Pooling != "" && j.Pooling != "mean" && j.Pooling != "cls" {
		pooling = option.Errorf("Pooling", "%q, want mean or cls", j.Pooling)
	}
	if _, err := faissgo.ParseMetric(j.Metric); err != nil {
		metric = option.Wrap("Metric", err)
	}
	return errors.Join(need, j.Specs().Check(), pooling, metric)
}
