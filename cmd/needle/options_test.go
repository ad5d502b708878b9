package main

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"needle/bench"
	"needle/engine"
	"needle/indexbuild"
	"needle/internal/option"
	"needle/server"
	"needle/server/lifecycle"
	"needle/weights"
)

// commandTables are the options tables each command derives its flags from.
func commandTables() map[string][]option.Specs {
	var (
		eng    engine.Options
		srv    server.Config
		life   lifecycle.Options
		job    indexbuild.Job
		send   weights.SendOptions
		recv   weights.RecvOptions
		pub    weights.PublishOptions
		kern   bench.KernelsOptions
		enc    bench.EncodeOptions
		ret    bench.RetrieveOptions
		trace  bench.TraceOptions
		docs   bench.DocstoreOptions
		recall bench.RecallOptions
		search bench.SearchOptions
		index  bench.IndexOptions
		wts    bench.WeightsOptions
	)
	return map[string][]option.Specs{
		"serve": {eng.Specs(), srv.Specs(), life.Specs()}, "build": {job.Specs()},
		"weights send": {send.Specs()}, "weights recv": {recv.Specs()}, "weights publish": {pub.Specs()},
		"bench kernels": {kern.Specs()}, "bench encode": {enc.Specs()}, "bench retrieve": {ret.Specs()},
		"bench trace": {trace.Specs()}, "bench docstore": {docs.Specs()}, "bench recall": {recall.Specs()},
		"bench search": {search.Specs()}, "bench index": {index.Specs()}, "bench weights": {wts.Specs()},
	}
}

// `needle <command> --help` lists every flag of the command's options tables with its default.
func TestHelpListsEveryFlagWithItsDefault(t *testing.T) {
	for cmd, tables := range commandTables() {
		out, err := exec.Command(filepath.Join(toolsDir, "needle"), append(strings.Fields(cmd), "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("needle %s --help: %v\n%s", cmd, err, out)
		}
		help := string(out)
		for _, table := range tables {
			table.SetDefaults()
			for _, s := range table {
				if !strings.Contains(help, "\n  -"+s.Flag+" ") && !strings.Contains(help, "\n  -"+s.Flag+"\n") {
					t.Errorf("needle %s --help does not list -%s", cmd, s.Flag)
				}
				switch d := s.Value(); d {
				case "", "0", "false", "0s":
				default:
					if !strings.Contains(help, "(default "+d+")") && !strings.Contains(help, "(default "+strconv.Quote(d)+")") {
						t.Errorf("needle %s --help does not give -%s's default %s", cmd, s.Flag, d)
					}
				}
			}
		}
	}
}

// A value out of range is refused by the library that declares the option, and the error
// names the flag: one case per kind of option (int, int64, float, duration, MiB; > and >=).
func TestBadValuesNameTheirFlags(t *testing.T) {
	run := func(args ...string) error {
		return needle.subs[args[0]].run(args[1:])
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--index", "i", "--max-batch", "0"}, "--max-batch: 0, want > 0"},
		{[]string{"serve", "--index", "i", "--threads", "-1"}, "--threads: -1, want >= 0"},
		{[]string{"serve", "--index", "i", "--drain", "0s"}, "--drain: 0s, want > 0"},
		{[]string{"serve", "--index", "i", "--cache-mb", "-1"}, "--cache-mb: -1, want >= 0"},
		{[]string{"serve", "--index", "i", "--max-body", "-5"}, "--max-body: -5, want > 0"},
		{[]string{"build", "--corpus", "c", "--model", "m", "--out", "o", "--shard-rows", "0"}, "--shard-rows: 0, want > 0"},
		{[]string{"build", "--bm25", "--corpus", "c", "--out", "o", "--bm25-memory-mb", "0"}, "--bm25-memory-mb: 0, want > 0"},
		{[]string{"build", "--corpus", "c", "--out", "o"}, "--model: required"},
		{[]string{"weights", "send", "--chunk", "0"}, "--chunk: 0, want > 0"},
		{[]string{"weights", "recv", "--from", "h:1", "--out", "o", "--threads", "0"}, "--threads: 0, want > 0"},
		{[]string{"weights", "recv", "--out", "o"}, "--from: required"},
		{[]string{"bench", "retrieve", "--queries", "q", "--fairness", "--rate", "0"}, "--rate: 0, want > 0"},
		{[]string{"bench", "kernels", "--min-time", "0s"}, "--min-time: 0s, want > 0"},
	} {
		if err := run(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("needle %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
