package main

import (
	"os"
	"time"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "retrieve", summary: "load-test a /retrieve server (needle or the Python anchor): QPS, p50/p99, errors", run: runBenchRetrieve})
}

func runBenchRetrieve(args []string) error {
	var o bench.RetrieveOptions
	fs := newFlagSet("bench retrieve", "--url URL --queries FILE|--trace FILE [flags]\n\n"+
		"Sends POST /retrieve requests from --concurrency callers (each waits for its answer before\n"+
		"sending the next) until --duration passes or --requests were sent, then prints queries/s,\n"+
		"requests/s, latency percentiles and errors. Works against needle serve and bench/anchor_server.py.\n"+
		"--trace replays a `needle bench trace` file instead: each query once, in order, --batch per\n"+
		"request, until the trace ends; it also prints the server's cache hit rate (from /metrics)\n"+
		"and the trace's repeat rate (the most a cache can hit).\n"+
		"--fairness measures head-of-line blocking instead (start the server with --cache-mb 0, unless\n"+
		"--singles-in-post): per\n"+
		"round, single queries at --rate/s for --idle, then one POST of --post queries alone and one with\n"+
		"singles at --rate/s while it runs (which goes first alternates); it prints the singles' p50/p99\n"+
		"idle and during the POST, the ratio of the p99s, and the POST's times alone and with the singles.")
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8000", "server base URL (/retrieve is appended)")
	fs.StringVar(&o.QueriesFile, "queries", "", "queries file: JSONL with a \"query\" (or \"question\") string per line, or plain text, one query per line (required)")
	fs.StringVar(&o.Trace, "trace", "", "a trace written by `needle bench trace`, replayed once in order (instead of --queries; --duration and --requests do not apply)")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "concurrent callers")
	fs.DurationVar(&o.Duration, "duration", 20*time.Second, "how long to send requests (the run also stops after --requests)")
	fs.IntVar(&o.Requests, "requests", 0, "stop after this many requests in total (0 = only --duration limits)")
	fs.IntVar(&o.Batch, "batch", 1, "queries per request (Search-R1 sends up to 2560 in one POST)")
	fs.IntVar(&o.TopK, "topk", 3, "topk sent with each request")
	fs.BoolVar(&o.ReturnScores, "return-scores", true, "return_scores sent with each request")
	fs.DurationVar(&o.Timeout, "timeout", 120*time.Second, "per-request timeout (a timeout counts as an error)")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "process id of the server (same machine): also report its CPU seconds per 1000 queries, a figure that holds on a busy shared machine where QPS depends on the CPU share (with --fairness: its CPU during each POST alone and with the singles, and the POST's share of it)")
	fair := bench.FairnessOptions{}
	fairness := fs.Bool("fairness", false, "measure how a big POST delays single queries sent meanwhile, and how they slow it (see above)")
	fs.IntVar(&fair.Post, "post", 2560, "with --fairness: queries in the big POST (Search-R1's one POST per turn)")
	fs.Float64Var(&fair.Rate, "rate", 10, "with --fairness: single queries per second, sent at a steady rate whether or not the earlier ones were answered")
	fs.IntVar(&fair.Workers, "workers", 0, "with --fairness: send singles from this many workers, each sending its next when answered (the saturated case), instead of at --rate")
	fs.BoolVar(&fair.InPost, "singles-in-post", false, "with --fairness, for a server with its result cache on: each POST asks new texts and the singles during it ask the POST's own texts (from its end)")
	fs.IntVar(&fair.Rounds, "rounds", 3, "with --fairness: rounds")
	fs.DurationVar(&fair.Idle, "idle", 5*time.Second, "with --fairness: how long singles are sent to the idle server per round")
	plotFlag(fs, &o.Plot)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fairness {
		o.Fairness = &fair
	}
	return bench.Retrieve(os.Stdout, o)
}
