package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"needle/engine"
	"needle/engine/bert"
	"needle/engine/indexbuild"
	"needle/engine/docstore"
	"needle/faissgo"
	"needle/internal/atomicfile"
	"needle/server"
)

func init() {
	register(command{name: "serve", summary: "serve /retrieve and /access (drop-in for the Search-R1 retrieval server)", run: runServe})
}

// serveFlags are `needle serve`'s settings; the anchors' flag names are aliases.
type serveFlags struct {
	index, corpus, pages, model string
	retrieverName, queryPrefix  string
	host                        string
	port, topk, threads         int
	saveAddressTo, authToken    string
	faissGPU, mmap              bool
	precision                   string
	forcePrecision              bool
	prefixSet                   bool // --query-prefix was given (even as "")
	maxBatch, maxQueued         int
	encoders                    int
	batchWait, drain            time.Duration
	cfg                         server.Config
}

func parseServeFlags(args []string) (*serveFlags, error) {
	f := &serveFlags{}
	fs := newFlagSet("serve", "--index DIR|FILE [--corpus FILE] [--model DIR] [flags]\n\n"+
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
	str(&f.index, "", "a needle build output folder (with manifest.json) or a bare FAISS index file (required)", "index", "index_path")
	str(&f.corpus, "", "corpus JSONL, line i = index row i (default: the corpus recorded in the build manifest)", "corpus", "corpus_path")
	str(&f.pages, "", "pages JSONL with a \"url\" per row, for /access (ASearcher's wiki_webpages.jsonl); without it /access answers 404", "pages", "pages_path")
	str(&f.model, "", "encoder model folder (config.json, model.safetensors, vocab.txt) (default: the model in the build manifest)", "model", "retriever_model")
	fs.StringVar(&f.retrieverName, "retriever_name", "", "model name as the anchors take it; a name containing \"e5\" sets the query prefix to \"query: \"")
	fs.StringVar(&f.queryPrefix, "query-prefix", "", "text prepended to every query before encoding (default: \"query: \" for e5 models: --retriever_name or a manifest passage prefix \"passage: \"; else none)")
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to bind (0.0.0.0 exposes the server to the network)")
	fs.IntVar(&f.port, "port", 8000, "TCP port (0 picks a free one; see --save-address-to)")
	fs.IntVar(&f.topk, "topk", 3, "results per query when a request has no topk (or null or 0)")
	fs.IntVar(&f.threads, "threads", 0, "threads for the encoder and FAISS (0 = all cores)")
	fs.StringVar(&f.precision, "precision", "", precisionUsage+" (default: the build manifest's, else fp16; another than the manifest's is an error without --force-precision)")
	fs.BoolVar(&f.forcePrecision, "force-precision", false, "serve at --precision even where the build manifest records another")
	fs.StringVar(&f.saveAddressTo, "save-address-to", "", "folder to write Host{ip}_IP{port}.txt = \"{ip}:{port}\" into once the server is ready (removed on SIGINT/SIGTERM)")
	fs.StringVar(&f.authToken, "auth-token", os.Getenv("NEEDLE_AUTH_TOKEN"), "if set, /retrieve, /access and /metrics need \"Authorization: Bearer <token>\" (default $NEEDLE_AUTH_TOKEN)")
	fs.BoolVar(&f.faissGPU, "faiss_gpu", false, "accepted for the anchors' scripts; this build has no GPU FAISS, so it says so and serves on the CPU")
	fs.BoolVar(&f.mmap, "mmap", false, "map IVF inverted lists from the index file instead of loading them (FAISS mmap; flat and HNSW indexes load into RAM anyway)")
	fs.IntVar(&f.maxBatch, "max-batch", 64, "most queries in one encoder batch and FAISS search (the batcher coalesces concurrent requests up to this)")
	fs.DurationVar(&f.batchWait, "batch-wait", 0, "how long a batch that is not full waits for more queries (0: take what is queued when the encoder is free)")
	fs.IntVar(&f.encoders, "encoders", 1, "encoder batches run at the same time (each also uses --threads BLAS threads; on 2 cores 2 encoders cost 3x the CPU per query, measured)")
	fs.IntVar(&f.maxQueued, "max-queued", 16384, "most queries waiting or in progress; beyond it requests get 503 + Retry-After")
	fs.IntVar(&f.cfg.MaxQueries, "max-queries", 8192, "most queries (or URLs) in one request; more get 422")
	fs.IntVar(&f.cfg.MaxTopK, "max-topk", 1000, "topk above this (or above the index size) is capped")
	fs.IntVar(&f.cfg.MaxHits, "max-hits", 1<<18, "most queries x topk in one request (bounds the response's memory); more get 422")
	fs.IntVar(&f.cfg.MaxBodyBytes, "max-body", 32<<20, "largest request body in bytes; larger get 413")
	fs.IntVar(&f.cfg.MaxConns, "max-conns", 4096, "most open client connections")
	fs.DurationVar(&f.cfg.ReadTimeout, "read-timeout", 60*time.Second, "time to read one request")
	fs.DurationVar(&f.cfg.WriteTimeout, "write-timeout", 60*time.Second, "time to write one response")
	fs.DurationVar(&f.cfg.IdleTimeout, "idle-timeout", 120*time.Second, "keep-alive wait for a connection's next request")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight requests may finish")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.prefixSet = f.prefixSet || fl.Name == "query-prefix" })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if f.index == "" {
		return nil, errors.New("--index (or --index_path) is required")
	}
	if f.topk <= 0 || f.port < 0 || f.port > 65535 {
		return nil, fmt.Errorf("--topk must be > 0 and --port in [0, 65535], got %d and %d", f.topk, f.port)
	}
	f.cfg.DefaultTopK, f.cfg.AuthToken = f.topk, f.authToken
	return f, nil
}

// servedFiles are the resolved inputs of one `needle serve`.
type servedFiles struct {
	indexFile, corpus, model, prefix string
	precision                        string               // of the query encoder
	manifest                         *indexbuild.Manifest // nil for a bare index file
}

// resolveFiles reads the build manifest when --index is a folder and fills in what the
// flags left out. The query prefix is the flag's, else "query: " for e5 models.
func resolveFiles(f *serveFlags) (servedFiles, error) {
	sf := servedFiles{indexFile: f.index, corpus: f.corpus, model: f.model, prefix: f.queryPrefix, precision: f.precision}
	if info, err := os.Stat(f.index); err != nil {
		return sf, fmt.Errorf("--index: %w", err)
	} else if info.IsDir() {
		m, err := indexbuild.ReadManifest(f.index)
		if err != nil {
			return sf, fmt.Errorf("--index: %w", err)
		}
		sf.manifest, sf.indexFile = m, filepath.Join(f.index, m.IndexFile)
		if sf.corpus == "" {
			sf.corpus = m.Corpus.Path
		}
		if sf.model == "" {
			sf.model = m.Model
		}
		if sf.precision, err = m.QueryPrecision(f.precision, f.forcePrecision); err != nil {
			return sf, fmt.Errorf("--index %s: %w", f.index, err)
		}
	}
	if sf.corpus == "" {
		return sf, errors.New("--corpus (or --corpus_path) is required with a bare index file")
	}
	if sf.model == "" {
		return sf, errors.New("--model (or --retriever_model) is required: the index has no manifest naming its model")
	}
	if !f.prefixSet {
		e5 := strings.Contains(strings.ToLower(f.retrieverName), "e5") ||
			(sf.manifest != nil && sf.manifest.Prefix == "passage: ")
		if e5 {
			sf.prefix = "query: "
		}
	}
	return sf, nil
}

func runServe(args []string) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	files, err := resolveFiles(f)
	if err != nil {
		return err
	}
	if f.faissGPU {
		fmt.Fprintln(os.Stderr, "needle serve: --faiss_gpu: this build has no GPU FAISS (no GPU on this machine); serving on the CPU")
	}
	srv := server.New(f.cfg)
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().(*net.TCPAddr)
	fmt.Fprintf(os.Stderr, "needle serve: listening on %s (GET /health answers; loading %s)\n", addr, files.indexFile)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	began := time.Now()
	type loadResult struct {
		parts *loadedParts
		err   error
	}
	loadDone := make(chan loadResult, 1)
	go func() {
		l, err := load(f, files, srv)
		loadDone <- loadResult{l, err}
	}()
	var loaded *loadedParts
	select {
	case res := <-loadDone:
		if res.err != nil {
			srv.Shutdown(context.Background())
			return res.err
		}
		loaded = res.parts
	case sig := <-stop:
		srv.Shutdown(context.Background())
		return fmt.Errorf("%v while loading: stopped before ready", sig)
	}
	srv.SetRetriever(loaded.retriever)
	addressFile, err := announce(f, addr)
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	fmt.Fprintf(os.Stderr, "needle serve: ready in %.1fs: %d vectors (%s), query prefix %q\n"+
		"  curl -s http://%s/retrieve -H 'Content-Type: application/json' -d '{\"queries\":[\"what is a needle\"],\"topk\":3,\"return_scores\":true}'\n",
		time.Since(began).Seconds(), loaded.retriever.Ntotal, files.indexFile, files.prefix, net.JoinHostPort(advertisedIP(f.host), strconv.Itoa(addr.Port)))

	select {
	case err := <-served:
		return fmt.Errorf("HTTP server stopped: %w", err)
	case sig := <-stop:
		fmt.Fprintf(os.Stderr, "needle serve: %v: draining in-flight requests (up to %v)\n", sig, f.drain)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	shutdownErr := srv.Shutdown(ctx)
	if shutdownErr == nil {
		// Only once no handler can call the batcher any more; after a drain timeout the
		// process exits and the OS releases everything.
		loaded.close()
	}
	if addressFile != "" {
		if err := os.Remove(addressFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return shutdownErr
}

// loadedParts are the open index, corpus, pages and encoder behind the Retriever.
type loadedParts struct {
	retriever *engine.Retriever
	index     *faissgo.Index
	corpus    *docstore.Corpus
	pages     *docstore.Pages
}

// close releases everything after the server has stopped.
func (l *loadedParts) close() {
	l.retriever.Batcher.Close()
	l.closeFiles()
}

// closeFiles closes the index, corpus and pages that are open (all of them once loaded,
// some when a load failed).
func (l *loadedParts) closeFiles() {
	if l.index != nil {
		l.index.Close()
	}
	if l.corpus != nil {
		l.corpus.Close()
	}
	if l.pages != nil {
		l.pages.Close()
	}
}

// load opens the index, corpus, pages and model at the same time (the slow parts are
// reading the index file and building the corpus offsets sidecar on first use).
func load(f *serveFlags, files servedFiles, srv *server.Server) (*loadedParts, error) {
	faissgo.Init(f.threads)
	l := &loadedParts{}
	var enc *bert.Encoder
	var wg sync.WaitGroup
	errs := make([]error, 4)
	run := func(i int, what string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs[i] = fmt.Errorf("%s: %w", what, err)
			}
		}()
	}
	run(0, "--index", func() (err error) { l.index, err = faissgo.Read(files.indexFile, f.mmap); return })
	run(1, "--corpus", func() (err error) { l.corpus, err = docstore.OpenCorpus(files.corpus, docstore.Options{}); return })
	if f.pages != "" {
		run(2, "--pages", func() (err error) { l.pages, err = docstore.OpenPages(f.pages, docstore.Options{}); return })
	}
	run(3, "--model", func() (err error) {
		opt := bert.Options{MaxLength: 256, BatchSize: f.maxBatch, Threads: f.threads, Precision: bert.Precision(files.precision)}
		if files.manifest != nil && files.manifest.Pooling != "" {
			opt.Pooling = files.manifest.Pooling
		}
		enc, err = bert.Load(files.model, opt)
		return
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		l.closeFiles()
		return nil, err
	}
	var pages engine.PageStore
	if l.pages != nil {
		pages = l.pages
	}
	r, err := engine.NewRetriever(enc, l.index, l.corpus, pages, files.prefix, engine.BatcherOptions{
		MaxBatch: f.maxBatch, MaxWait: f.batchWait, MaxQueued: f.maxQueued, Encoders: f.encoders, OnBatch: srv.ObserveBatch,
	})
	if err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("%s with %s and %s: %w", files.indexFile, files.corpus, files.model, err)
	}
	l.retriever = r
	return l, nil
}

// announce checks that the server answers /ready through its socket, then writes the
// address file (atomically) if --save-address-to was given and returns its path.
func announce(f *serveFlags, addr *net.TCPAddr) (string, error) {
	host := advertisedIP(f.host)
	hostPort := net.JoinHostPort(host, strconv.Itoa(addr.Port))
	probe := net.JoinHostPort(f.host, strconv.Itoa(addr.Port))
	if wildcard(f.host) {
		probe = net.JoinHostPort("127.0.0.1", strconv.Itoa(addr.Port))
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + probe + "/ready")
	if err != nil {
		return "", fmt.Errorf("self-check GET /ready: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("self-check GET /ready: status %d", resp.StatusCode)
	}
	if f.saveAddressTo == "" {
		return "", nil
	}
	if err := os.MkdirAll(f.saveAddressTo, 0o755); err != nil {
		return "", fmt.Errorf("--save-address-to: %w", err)
	}
	path := filepath.Join(f.saveAddressTo, fmt.Sprintf("Host%s_IP%d.txt", host, addr.Port))
	if err := atomicfile.Write(path, []byte(hostPort)); err != nil {
		return "", fmt.Errorf("--save-address-to: %w", err)
	}
	fmt.Fprintf(os.Stderr, "needle serve: wrote %s\n", path)
	return path, nil
}

// advertisedIP is the address clients should dial: the bind address, or for a wildcard
// bind the machine's first non-loopback IPv4 address (the anchors use their host's IP).
func advertisedIP(host string) string {
	if !wildcard(host) {
		return host
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// wildcard reports whether host binds every interface.
func wildcard(host string) bool { return host == "0.0.0.0" || host == "::" || host == "" }
