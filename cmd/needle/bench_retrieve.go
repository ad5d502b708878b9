package main

import (
	"os"

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
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(bench.Retrieve(os.Stdout, o))
}
