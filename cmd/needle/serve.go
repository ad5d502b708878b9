package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"needle/encoder/bert"
	"needle/engine"
	"needle/server"
	"needle/server/lifecycle"
)

func init() {
	register(command{name: "serve", summary: "serve /retrieve and /access (drop-in for the Search-R1 retrieval server)", run: runServe})
}

// serveFlags are `needle serve`'s settings; the anchors' flag names are aliases. The
// engine's flags fill engine.Options; the rest belong to the HTTP server and this command.
type serveFlags struct {
	engine                   engine.Options
	queryPrefix              string
	host                     string
	port, topk               int
	saveAddressTo, authToken string
	faissGPU, replace        bool
	drain                    time.Duration
	watchPeers               bool
	watchInterval            time.Duration
	witness                  string
	cfg                      server.Config
	cacheMB                  int
}

func parseServeFlags(args []string) (*serveFlags, error) {
	f := &serveFlags{}
	fs := newFlagSet("serve", "--index DIR|FILE [--corpus FILE] [--model DIR] [flags]\n"+
		"       needle serve --milvus URI --collection NAME --corpus FILE --model DIR [flags]\n\n"+
		"Serves POST /retrieve and POST /access with the request and response shapes of Search-R1's\n"+
		"retrieval_server.py, plus GET /health, /ready and /metrics. The anchors' flag names\n"+
		"(--index_path --corpus_path --pages_path --retriever_model --retriever_name --faiss_gpu)\n"+
		"are accepted, so their launch scripts work unchanged.")
	str := func(p *string, def, usage string, names ...string) {
		for i, n := range names {
			u := usage
			if i > 0 {
				u = "alias of --" + names[0]
			}
			fs.StringVar(p, n, def, u)
		}
	}
	str(&f.engine.Index, "", "a needle build output folder (with manifest.json), a needle convert compact form folder (with compact.json) or a bare FAISS index file (required)", "index", "index_path")
	str(&f.engine.Corpus, "", "corpus JSONL, line i = index row i (default: the corpus recorded in the build manifest)", "corpus", "corpus_path")
	str(&f.engine.Pages, "", "pages JSONL with a \"url\" per row, for /access (ASearcher's wiki_webpages.jsonl); without it /access answers 404", "pages", "pages_path")
	str(&f.engine.Model, "", "encoder model folder (config.json, model.safetensors, vocab.txt) (default: the model in the build manifest)", "model", "retriever_model")
	fs.StringVar(&f.engine.RetrieverName, "retriever_name", "", "model name as the anchors take it; a name containing \"e5\" sets the query prefix to \"query: \"")
	fs.StringVar(&f.queryPrefix, "query-prefix", "", "text prepended to every query before encoding (default: \"query: \" for e5 models: --retriever_name or a manifest passage prefix \"passage: \"; else none)")
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to bind (0.0.0.0 exposes the server to the network)")
	fs.IntVar(&f.port, "port", 8000, "TCP port (0 picks a free one; see --save-address-to)")
	fs.IntVar(&f.topk, "topk", 3, "results per query when a request has no topk (or null or 0)")
	fs.IntVar(&f.engine.Threads, "threads", 0, "threads for the encoder and FAISS (0 = all cores)")
	fs.StringVar(&f.engine.Precision, "precision", "", precisionUsage+" (default: the build manifest's, else fp16; another than the manifest's is an error without --force-precision)")
	fs.BoolVar(&f.engine.ForcePrecision, "force-precision", false, "serve at --precision even where the build manifest records another")
	fs.StringVar(&f.saveAddressTo, "save-address-to", "", "folder to write Host{ip}_IP{port}.txt = \"{ip}:{port}\" into (ASearcher's client reads it) as soon as the port listens; until ready, requests are held (--load-wait). Removed when the drain begins, before the port refuses connections, unless it is the folder's last address file (docs/lifecycle.md)")
	fs.BoolVar(&f.watchPeers, "watch-peers", true, "with --save-address-to: probe the other replicas of the folder (GET /health) and remove the files of those that are gone: at once when their\n"+
		"host refuses the connection (a killed process), after 8 x --watch-interval without an answer when this replica hears a majority of the folder or reaches\n"+
		"--watch-witness (the other side of a partition removes nothing); never its own file, never the folder's last (docs/serve.md)")
	fs.DurationVar(&f.watchInterval, "watch-interval", 250*time.Millisecond, "with --watch-peers: time between probes of each replica; a probe gets 4x as long to answer, and a replica silent for 8x is taken for unreachable")
	fs.StringVar(&f.witness, "watch-witness", lifecycle.WitnessGateway, "with --watch-peers: host:port whose answer to a TCP connect (accepted or refused) shows this replica is not the cut-off side of a partition;\n"+
		"\"gateway\": the default route's gateway, port 9; \"\": none (then only a majority of the folder's replicas decides); none either on a loopback --host")
	fs.StringVar(&f.authToken, "auth-token", os.Getenv("NEEDLE_AUTH_TOKEN"), "if set, /retrieve, /access and /metrics need \"Authorization: Bearer <token>\" (default $NEEDLE_AUTH_TOKEN)")
	fs.BoolVar(&f.faissGPU, "faiss_gpu", false, "the anchors' flag: same as --gpu")
	fs.Var(gpuMode{&f.engine.GPU}, "gpu", "serve a flat index (IndexFlatIP/L2) from the GPUs in fp16 and encode queries on the first of them: --gpu uses them when it can, else says why in one line and serves on the CPU; --gpu=require fails instead")
	fs.Func("gpus", "comma-separated ordinals of the GPUs to shard the index over, e.g. 0,1 (default: all that CUDA_VISIBLE_DEVICES shows)", func(v string) (err error) {
		f.engine.GPUs, err = parseOrdinals(v)
		return err
	})
	fs.BoolVar(&f.engine.GPUFP32, "gpu-fp32", false, "keep the vectors in fp32 on the GPU (twice the memory of fp16, no fp16 rounding of scores)")
	fs.BoolVar(&f.engine.Mmap, "mmap", false, "map IVF inverted lists from the index file instead of loading them (FAISS mmap; HNSW indexes load into RAM anyway)")
	fs.IntVar(&f.engine.Nprobe, "nprobe", 0, "IVF lists visited per query of an IVF index or compact form (0: the form's compact.json, else FAISS's default of 1)")
	fs.IntVar(&f.engine.Rescore, "rescore", 0, "compact forms: candidates per query re-scored exactly from the source's fp32 rows (0: the form's compact.json; -1: none, the codes' approximate scores)")
	fs.StringVar(&f.engine.Backend, "index-backend", "", "auto (the default): compact for needle convert folders, mapped for flat index files (IndexFlatIP/L2, e.g. e5_Flat.index), faiss for the rest; compact: FAISS codes in RAM, candidates re-scored from the source file; mapped: the flat file's vectors mapped in place, ready in seconds with memory independent of the index size, one exact pass over the file per batch (FAISS's answers); faiss: FAISS loads the index into RAM (a flat file needs RAM = its size)")
	fs.IntVar(&f.engine.Batcher.MaxBatch, "max-batch", 64, "most queries in one encoder batch and FAISS search (the batcher coalesces concurrent requests up to this)")
	fs.DurationVar(&f.engine.Batcher.MaxWait, "batch-wait", 0, "how long a batch that is not full waits for more queries (0: take what is queued when the encoder is free)")
	fs.IntVar(&f.engine.Batcher.Encoders, "encoders", 1, "encoder batches run at the same time in each of the two lanes, requests of up to --max-batch queries and larger ones (each runs a team of --threads threads: more encoders than cores make them wait on each other)")
	fs.IntVar(&f.engine.Batcher.MaxQueued, "max-queued", 16384, "most queries waiting or in progress; beyond it requests get 503 + Retry-After")
	fs.IntVar(&f.cfg.MaxQueries, "max-queries", 8192, "most queries (or URLs) in one request; more get 422")
	fs.IntVar(&f.cfg.MaxTopK, "max-topk", 1000, "topk above this (or above the index size) is capped")
	fs.IntVar(&f.cfg.MaxHits, "max-hits", 1<<18, "most queries x topk in one request (bounds the response's memory); more get 422")
	fs.IntVar(&f.cfg.MaxBodyBytes, "max-body", 32<<20, "largest request body in bytes; larger get 413")
	fs.IntVar(&f.cfg.MaxConns, "max-conns", 4096, "most open client connections")
	fs.DurationVar(&f.cfg.ReadTimeout, "read-timeout", 60*time.Second, "time to read one request")
	fs.DurationVar(&f.cfg.WriteTimeout, "write-timeout", 60*time.Second, "time to write one response")
	fs.DurationVar(&f.cfg.IdleTimeout, "idle-timeout", 120*time.Second, "keep-alive wait for a connection's next request")
	fs.IntVar(&f.cacheMB, "cache-mb", 256, "result cache in MiB: answers kept by exact query text and topk, so the rollouts of a GRPO group asking the same query are searched once; cached answers are byte for byte the first one (0 turns it off)")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight requests may finish")
	fs.DurationVar(&f.cfg.LoadWait, "load-wait", 10*time.Minute, "how long a /retrieve or /access that arrives while the index loads waits for it (clients without retries, e.g. Search-R1's, get their answer late instead of a 503); past it 503 + Retry-After; 0 answers 503 at once")
	fs.BoolVar(&f.replace, "replace", false, "take over --host:--port from the needle serve running there: it keeps serving while this one loads, then drains and exits, and no connection is refused in between (docs/lifecycle.md); without a needle there, start as usual")
	fs.StringVar(&f.engine.Milvus.URI, "milvus", "", "search a Milvus collection (standalone or cluster: same API) at this URI, host:port or http(s)://host:port,\n"+
		"instead of a FAISS index; needs --collection, and --corpus and --model (or --index DIR of a needle build naming them)")
	fs.StringVar(&f.engine.Milvus.Collection, "collection", "", "with --milvus: the collection, built by needle build --milvus")
	fs.IntVar(&f.engine.Milvus.Ef, "milvus-ef", 0, "with --milvus: HNSW search list size, raised to topk when smaller (0 = 128)")
	fs.IntVar(&f.engine.Milvus.Nprobe, "milvus-nprobe", 0, "with --milvus: IVF lists probed per query (0 = 32)")
	fs.DurationVar(&f.engine.Milvus.Timeout, "milvus-timeout", 0, "with --milvus: most time one search may take (0 = 10s); past it, or with Milvus down,\n"+
		"/retrieve answers 503 + Retry-After and /ready is false until Milvus answers again")
	fs.StringVar(&f.engine.BM25, "bm25", "", "a needle build --bm25 folder of the same corpus, served beside the dense --index: hybrid retrieval (docs/retrievers.md);\n"+
		"an --index folder holding a BM25 index alone (or --retriever_name bm25) serves BM25 without a model")
	fs.StringVar(&f.engine.Fusion.Method, "fusion", "", "with --bm25: rrf (the default: reciprocal rank fusion, k = 60) or weighted (--fusion-weight x dense + the rest x BM25, min-max normalized)")
	fs.Float64Var(&f.engine.Fusion.Weight, "fusion-weight", 0.5, "with --fusion weighted: the dense share, in (0, 1] (BM25 has the rest)")
	fs.StringVar(&f.engine.RerankModel, "rerank-model", "", "a cross-encoder folder (HF BertForSequenceClassification, one logit, e.g. cross-encoder/ms-marco-MiniLM-L12-v2):\n"+
		"/retrieve then takes Search-R1's retrieve-then-rerank request (topk_retrieval, topk_rerank) and POST /rerank is served (docs/retrievers.md)")
	fs.IntVar(&f.engine.RerankBatch, "reranker_batch_size", 0, "with --rerank-model: pairs per cross-encoder pass (0: 32, the anchor's default)")
	fs.IntVar(&f.engine.Fusion.Candidates, "fusion-candidates", 0, "with --bm25: hits each retriever contributes per query (0: max(topk, 100))")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	gpuGiven := false
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "query-prefix" {
			f.engine.QueryPrefix = &f.queryPrefix
		}
		gpuGiven = gpuGiven || fl.Name == "gpu"
	})
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if f.engine.Milvus.URI != "" {
		f.engine.Backend = engine.BackendMilvus
		if f.engine.Milvus.Collection == "" {
			return nil, errors.New("--milvus needs --collection")
		}
	} else if f.engine.Index == "" {
		return nil, errors.New("--index (or --index_path) is required, or --milvus with --collection")
	}
	if f.topk <= 0 || f.port < 0 || f.port > 65535 {
		return nil, fmt.Errorf("--topk must be > 0 and --port in [0, 65535], got %d and %d", f.topk, f.port)
	}
	if f.replace && f.port == 0 {
		return nil, errors.New("--replace needs the --port of the server to replace")
	}
	if err := checkLimits(f); err != nil {
		return nil, err
	}
	f.engine.CacheBytes = int64(f.cacheMB) << 20
	f.cfg.DefaultTopK, f.cfg.AuthToken = f.topk, f.authToken
	if f.faissGPU && !gpuGiven {
		f.engine.GPU = engine.GPUAuto
	}
	return f, nil
}

// checkLimits refuses limits that are 0 or negative, naming the flag: past the flag
// parser a 0 would quietly become the default (server.Config, engine.BatcherOptions).
func checkLimits(f *serveFlags) error {
	for _, l := range []struct {
		name     string
		value    int64
		zeroOK   bool // 0 has a meaning of its own (see --help)
		duration bool
	}{
		{"max-batch", int64(f.engine.Batcher.MaxBatch), false, false},
		{"max-queued", int64(f.engine.Batcher.MaxQueued), false, false},
		{"encoders", int64(f.engine.Batcher.Encoders), false, false},
		{"batch-wait", int64(f.engine.Batcher.MaxWait), true, true},
		{"threads", int64(f.engine.Threads), true, false},
		{"max-queries", int64(f.cfg.MaxQueries), false, false},
		{"max-topk", int64(f.cfg.MaxTopK), false, false},
		{"max-hits", int64(f.cfg.MaxHits), false, false},
		{"max-body", int64(f.cfg.MaxBodyBytes), false, false},
		{"max-conns", int64(f.cfg.MaxConns), false, false},
		{"read-timeout", int64(f.cfg.ReadTimeout), false, true},
		{"write-timeout", int64(f.cfg.WriteTimeout), false, true},
		{"idle-timeout", int64(f.cfg.IdleTimeout), false, true},
		{"drain", int64(f.drain), false, true},
		{"watch-interval", int64(f.watchInterval), false, true},
		{"load-wait", int64(f.cfg.LoadWait), true, true},
		{"cache-mb", int64(f.cacheMB), true, false},
	} {
		if l.value > 0 || (l.value == 0 && l.zeroOK) {
			continue
		}
		got, want := fmt.Sprint(l.value), "> 0"
		if l.duration {
			got = time.Duration(l.value).String()
		}
		if l.zeroOK {
			want = ">= 0"
		}
		return fmt.Errorf("--%s must be %s, got %s", l.name, want, got)
	}
	return nil
}

// gpuMode is --gpu: alone it means auto; =auto, =require or =off.
type gpuMode struct{ v *string }

func (g gpuMode) IsBoolFlag() bool { return true }

func (g gpuMode) String() string {
	if g.v == nil {
		return ""
	}
	return *g.v
}

func (g gpuMode) Set(s string) error {
	switch s {
	case "true", engine.GPUAuto:
		*g.v = engine.GPUAuto
	case engine.GPURequire:
		*g.v = engine.GPURequire
	case "false", "off":
		*g.v = ""
	default:
		return fmt.Errorf("takes auto, require or off, not %q", s)
	}
	return nil
}

// parseOrdinals reads a comma-separated list of GPU ordinals.
func parseOrdinals(v string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a GPU ordinal (want e.g. 0,1)", part)
		}
		out = append(out, n)
	}
	return out, nil
}

func runServe(args []string) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	f.engine.Log = os.Stderr
	opts, err := engine.Resolve(f.engine)
	if err != nil {
		return flagError(err, serveOptionFlags)
	}
	f.cfg.Info = server.Info{Index: opts.IndexName(), Model: opts.Model, Precision: cmp.Or(opts.Precision, string(bert.FP16))}
	srv := server.New(f.cfg)
	opts.Batcher.OnBatch = srv.ObserveBatch
	watch := time.Duration(0)
	if f.watchPeers {
		watch = f.watchInterval
	}
	return lifecycle.Run(lifecycle.Options{Host: f.host, Port: f.port, SaveAddressTo: f.saveAddressTo, Replace: f.replace,
		WatchInterval: watch, Witness: f.witness, Drain: f.drain, IndexName: opts.IndexName(), QueryPrefix: *opts.QueryPrefix, Log: os.Stderr},
		srv, func() (*engine.Retriever, error) {
			r, err := engine.Open(opts)
			return r, flagError(err, serveOptionFlags)
		})
}
