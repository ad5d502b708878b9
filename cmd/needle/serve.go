package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"

	"needle/encoder/bert"
	"needle/engine"
	"needle/internal/secret"
	"needle/server"
	"needle/server/lifecycle"
)

func init() {
	register(command{name: "serve", summary: "serve /retrieve and /access (drop-in for the Search-R1 retrieval server)", run: runServe})
}

// serveFlags are `needle serve`'s settings: the options of the engine, the HTTP server and
// the process's lifecycle, each declared by its package (Specs); the anchors' flag names are
// aliases.
type serveFlags struct {
	engine engine.Options
	server server.Config
	life   lifecycle.Options
	fs     *flagSet // names the flags of option errors
}

// anchorAliases are the anchors' flag names of serve's flags (their launch scripts work unchanged).
var anchorAliases = [][2]string{{"index_path", "index"}, {"corpus_path", "corpus"}, {"pages_path", "pages"}, {"retriever_model", "model"}}

func parseServeFlags(args []string) (*serveFlags, error) {
	f := &serveFlags{}
	fs := newFlagSet("serve", "--index DIR|FILE [--corpus FILE] [--model DIR] [flags]\n"+
		"       needle serve --milvus URI --collection NAME --corpus FILE --model DIR [flags]\n\n"+
		"Serves POST /retrieve and POST /access with the request and response shapes of Search-R1's\n"+
		"retrieval_server.py, plus GET /health, /ready and /metrics. The anchors' flag names\n"+
		"(--index_path --corpus_path --pages_path --retriever_model --retriever_name --faiss_gpu)\n"+
		"are accepted, so their launch scripts work unchanged.")
	f.fs = fs
	fs.options(f.engine.Specs(), f.server.Specs(), f.life.Specs())
	for _, a := range anchorAliases {
		fs.alias(a[0], a[1])
	}
	faissGPU := fs.Bool("faiss_gpu", false, "the anchors' flag: same as --gpu")
	tokenFile := fs.String("token-file", os.Getenv(secret.EnvFile), "--auth-token read from a file (default $"+secret.EnvFile+"): the file `needle weights --token-file` takes")
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if !fs.given("auth-token") { // not a flag default: --help would print the token
		f.server.AuthToken = os.Getenv("NEEDLE_AUTH_TOKEN")
	}
	if *tokenFile != "" {
		if f.server.AuthToken != "" {
			return nil, errors.New("--auth-token and --token-file (or $NEEDLE_AUTH_TOKEN and $" + secret.EnvFile + "): give one")
		}
		t, err := secret.ReadFile(*tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		f.server.AuthToken = string(t)
	}
	if *faissGPU && !fs.given("gpu") {
		f.engine.GPU = engine.GPUAuto
	}
	if f.engine.Milvus.URI != "" {
		f.engine.Backend = engine.BackendMilvus
		if f.engine.Milvus.Collection == "" {
			return nil, errors.New("--milvus needs --collection")
		}
	} else if f.engine.Index == "" {
		return nil, errors.New("--index (or --index_path) is required, or --milvus with --collection")
	}
	return f, fs.named(errors.Join(f.engine.Check(), f.server.Specs().Check(), f.life.Check()))
}

func runServe(args []string) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	f.engine.Log = os.Stderr
	opts, err := engine.Resolve(f.engine)
	if err != nil {
		return f.fs.named(err)
	}
	f.server.Info = server.Info{Index: opts.IndexName(), Model: opts.Model, Precision: cmp.Or(opts.Precision, string(bert.FP16))}
	srv, err := server.New(f.server)
	if err != nil {
		return f.fs.named(err)
	}
	opts.Batcher.OnBatch = srv.ObserveBatch
	f.life.IndexName, f.life.QueryPrefix, f.life.Log = opts.IndexName(), *opts.QueryPrefix, os.Stderr
	return f.fs.named(lifecycle.Run(f.life, srv, func() (*engine.Retriever, error) {
		r, err := engine.Open(opts)
		return r, f.fs.named(err)
	}))
}
