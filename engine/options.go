package engine

import (
	"fmt"
	"strconv"
	"strings"

	"needle/encoder/bert"
	"needle/internal/option"
)

// Specs declares the options (`needle serve`'s flags, but for the server's and the process's
// own: package server and server/lifecycle declare those).
func (o *Options) Specs() option.Specs {
	s := option.Specs{
		option.String(&o.Index, "Index", "index", "", "a needle build output folder (with manifest.json), a needle convert compact form folder (with compact.json) or a bare FAISS index file (required)"),
		option.String(&o.Corpus, "Corpus", "corpus", "", "corpus JSONL, line i = index row i (default: the corpus recorded in the build manifest)"),
		option.String(&o.Pages, "Pages", "pages", "", "pages JSONL with a \"url\" per row, for /access (ASearcher's wiki_webpages.jsonl); without it /access answers 404"),
		option.String(&o.Model, "Model", "model", "", "encoder model folder (config.json, model.safetensors, vocab.txt) (default: the model in the build manifest)"),
		option.String(&o.RetrieverName, "RetrieverName", "retriever_name", "", "model name as the anchors take it; a name containing \"e5\" sets the query prefix to \"query: \""),
		option.Var(prefixFlag{&o.QueryPrefix}, "QueryPrefix", "query-prefix", "", "text prepended to every query before encoding (default: \"query: \" for e5 models: --retriever_name or a manifest passage prefix \"passage: \"; else none)"),
		option.Num(&o.Threads, "Threads", "threads", 0, option.From(0), "threads for the encoder and FAISS (0 = all cores)"),
		option.String(&o.Precision, "Precision", "precision", "", bert.PrecisionHelp+" (default: the build manifest's, else fp16; another than the manifest's is an error without --force-precision)"),
		option.Bool(&o.ForcePrecision, "ForcePrecision", "force-precision", false, "serve at --precision even where the build manifest records another"),
		option.Var(bert.GPUFlag{Mode: &o.GPU}, "GPU", "gpu", "", "serve a flat index (IndexFlatIP/L2) from the GPUs in fp16 and encode queries on the first of them: --gpu uses them when it can, else says why in one line and serves on the CPU; --gpu=require fails instead"),
		option.Var(ordinalsFlag{&o.GPUs}, "GPUs", "gpus", "", "comma-separated ordinals of the GPUs to shard the index over, e.g. 0,1 (default: all that CUDA_VISIBLE_DEVICES shows)"),
		option.Bool(&o.GPUFP32, "GPUFP32", "gpu-fp32", false, "keep the vectors in fp32 on the GPU (twice the memory of fp16, no fp16 rounding of scores)"),
		option.Bool(&o.Mmap, "Mmap", "mmap", false, "map IVF inverted lists from the index file instead of loading them (FAISS mmap; HNSW indexes load into RAM anyway)"),
		option.Num(&o.Nprobe, "Nprobe", "nprobe", 0, option.From(0), "IVF lists visited per query of an IVF index or compact form (0: the form's compact.json, else FAISS's default of 1)"),
		option.Num(&o.Rescore, "Rescore", "rescore", 0, option.From(-1), "compact forms: candidates per query re-scored exactly from the source's fp32 rows (0: the form's compact.json; -1: none, the codes' approximate scores)"),
		option.String(&o.Backend, "Backend", "index-backend", "", "auto (the default): compact for needle convert folders, mapped for flat index files (IndexFlatIP/L2, e.g. e5_Flat.index), faiss for the rest; compact: FAISS codes in RAM, candidates re-scored from the source file; mapped: the flat file's vectors mapped in place, ready in seconds with memory independent of the index size, one exact pass over the file per batch (FAISS's answers); faiss: FAISS loads the index into RAM (a flat file needs RAM = its size)"),
		option.MiB(&o.CacheBytes, "CacheBytes", "cache-mb", 256<<20, option.From(0), "result cache in `MiB`: answers kept by exact query text and topk, so the rollouts of a GRPO group asking the same query are searched once; cached answers are byte for byte the first one (0 turns it off)"),
		option.String(&o.BM25, "BM25", "bm25", "", "a needle build --bm25 folder of the same corpus, served beside the dense --index: hybrid retrieval (docs/retrievers.md);\n"+
			"an --index folder holding a BM25 index alone (or --retriever_name bm25) serves BM25 without a model"),
		option.String(&o.RerankModel, "RerankModel", "rerank-model", "", "a cross-encoder folder (HF BertForSequenceClassification, one logit, e.g. cross-encoder/ms-marco-MiniLM-L12-v2):\n"+
			"/retrieve then takes Search-R1's retrieve-then-rerank request (topk_retrieval, topk_rerank) and POST /rerank is served (docs/retrievers.md)"),
		option.Num(&o.RerankBatch, "RerankBatch", "reranker_batch_size", 0, option.From(0), "with --rerank-model: pairs per cross-encoder pass (0: 32, the anchor's default)"),
	}
	s = append(s, o.Batcher.Specs().Under("Batcher.")...)
	s = append(s, o.Milvus.Specs().Under("Milvus.")...)
	return append(s, o.Fusion.Specs().Under("Fusion.")...)
}

// Check refuses the options their specs do not take, and fusion options out of range.
func (o Options) Check() error {
	if err := o.Specs().Check(); err != nil {
		return err
	}
	return o.Fusion.check()
}

// Specs declares the options.
func (o *BatcherOptions) Specs() option.Specs {
	return option.Specs{
		option.Num(&o.MaxBatch, "MaxBatch", "max-batch", 64, option.Above(0), "most queries in one encoder batch and FAISS search (the batcher coalesces concurrent requests up to this)"),
		option.Num(&o.MaxWait, "MaxWait", "batch-wait", 0, option.From(0), "how long a batch that is not full waits for more queries (0: take what is queued when the encoder is free)"),
		option.Num(&o.Encoders, "Encoders", "encoders", 1, option.Above(0), "encoder batches run at the same time in each of the two lanes, requests of up to --max-batch queries and larger ones (each runs a team of --threads threads: more encoders than cores make them wait on each other)"),
		option.Num(&o.MaxQueued, "MaxQueued", "max-queued", 16384, option.Above(0), "most queries waiting or in progress; beyond it requests get 503 + Retry-After"),
	}
}

// Specs declares the options.
func (o *FusionOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Method, "Method", "fusion", "", "with --bm25: rrf (the default: reciprocal rank fusion, k = 60) or weighted (--fusion-weight x dense + the rest x BM25, min-max normalized)"),
		option.Num(&o.Weight, "Weight", "fusion-weight", 0.5, option.Any, "with --fusion weighted: the dense share, in (0, 1] (BM25 has the rest)"),
		option.Num(&o.Candidates, "Candidates", "fusion-candidates", 0, option.From(0), "with --bm25: hits each retriever contributes per query (0: max(topk, 100))"),
	}
}

// prefixFlag is Options.QueryPrefix as a flag: given, even empty, it is the prefix; not given
// (nil), Resolve guesses it.
type prefixFlag struct{ p **string }

func (f prefixFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return **f.p
}

func (f prefixFlag) Set(s string) error {
	*f.p = &s
	return nil
}

// ordinalsFlag is Options.GPUs as a flag: comma-separated GPU ordinals.
type ordinalsFlag struct{ p *[]int }

func (f ordinalsFlag) String() string {
	if f.p == nil {
		return ""
	}
	s := make([]string, len(*f.p))
	for i, n := range *f.p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (f ordinalsFlag) Set(v string) error {
	var out []int
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a GPU ordinal (want e.g. 0,1)", part)
		}
		out = append(out, n)
	}
	*f.p = out
	return nil
}
