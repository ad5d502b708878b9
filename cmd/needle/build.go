package main

import (
	"os"

	"needle/indexbuild"
	"needle/internal/buildinfo"
)

func init() {
	register(command{name: "build", summary: "corpus JSONL -> embeddings -> FAISS index folder, or -> BM25 index with --bm25 (resumable)", run: runBuild})
}

func runBuild(args []string) error {
	var job indexbuild.Job
	fs := newFlagSet("build", "--corpus C.jsonl --model DIR --out DIR [flags]")
	fs.options(job.Specs())
	job.LoadEncoder = gpuEncoderFlags(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	job.Normalize, job.Version, job.Log = true, buildinfo.Version(), os.Stderr
	return fs.named(job.Run())
}
