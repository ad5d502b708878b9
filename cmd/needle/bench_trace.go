package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "trace", summary: "write a GRPO-shaped query trace (prompts x rollouts x turns) for bench retrieve --trace", run: runBenchTrace})
}

func runBenchTrace(args []string) error {
	var o bench.TraceOptions
	fs := newFlagSet("bench trace", "--queries FILE --out FILE [flags]\n\n"+
		"Writes the queries of one GRPO step of a search agent, one JSON line per query in arrival\n"+
		"order, for `needle bench retrieve --trace FILE` (which replays it against a server and\n"+
		"prints the result cache's hit rate). The mix, per prompt:\n"+
		"  turn 1:       all --rollouts rollouts ask the prompt's question (one text, 8 times)\n"+
		"  later turns:  --own rollouts ask a query of their own, the others one shared follow-up\n"+
		"With the defaults (8 rollouts, 3 turns, --own 2) a prompt asks 24 queries of 7 distinct\n"+
		"texts: 70.8% repeat an earlier query. Arrival order: every turn-1 query of the step in\n"+
		"random order, then every turn-2 query, and so on. Texts are distinct lines of --queries,\n"+
		"drawn at random (the WordNet example sentences of tools/wordnet are real English).")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(bench.Trace(os.Stdout, o))
}
