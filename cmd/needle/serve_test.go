package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"needle/engine"
)

// The flags (and the anchors' aliases) fill engine.Options; engine.Resolve's own test
// covers what a manifest adds.
func TestServeFlags(t *testing.T) {
	empty, defaults := "", engine.BatcherOptions{MaxBatch: 64, MaxQueued: 16384, Encoders: 1}
	for _, tc := range []struct {
		name string
		args []string
		want engine.Options
	}{
		{"defaults", []string{"--index", "dir"}, engine.Options{Index: "dir", Batcher: defaults}},
		{"explicit empty prefix is kept", []string{"--index", "dir", "--query-prefix", ""},
			engine.Options{Index: "dir", QueryPrefix: &empty, Batcher: defaults}},
		{"anchor aliases, e5 name", []string{"--index_path", "x.index", "--corpus_path", "c.jsonl", "--retriever_model", "/m/e5-base-v2",
			"--pages_path", "p.jsonl", "--retriever_name", "e5", "--faiss_gpu", "--topk", "3", "--port", "8001"},
			engine.Options{Index: "x.index", Corpus: "c.jsonl", Model: "/m/e5-base-v2", Pages: "p.jsonl", RetrieverName: "e5", GPU: engine.GPUAuto, Batcher: defaults}},
		{"--gpu alone", []string{"--index", "i", "--gpu"}, engine.Options{Index: "i", GPU: engine.GPUAuto, Batcher: defaults}},
		{"--gpu=require on two GPUs in fp32", []string{"--index", "i", "--gpu=require", "--gpus", "0, 2", "--gpu-fp32"},
			engine.Options{Index: "i", GPU: engine.GPURequire, GPUs: []int{0, 2}, GPUFP32: true, Batcher: defaults}},
		{"--gpu=off wins over --faiss_gpu", []string{"--index", "i", "--gpu=off", "--faiss_gpu"}, engine.Options{Index: "i", Batcher: defaults}},
		{"engine settings", []string{"--index", "i", "--threads", "2", "--mmap", "--max-batch", "8", "--batch-wait", "2ms",
			"--encoders", "2", "--max-queued", "100"},
			engine.Options{Index: "i", Threads: 2, Mmap: true, Batcher: engine.BatcherOptions{MaxBatch: 8, MaxWait: 2 * time.Millisecond, MaxQueued: 100, Encoders: 2}}},
	} {
		f, err := parseServeFlags(tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, want := f.engine, tc.want
		if (got.QueryPrefix == nil) != (want.QueryPrefix == nil) || (got.QueryPrefix != nil && *got.QueryPrefix != *want.QueryPrefix) {
			t.Errorf("%s: query prefix %v, want %v", tc.name, got.QueryPrefix, want.QueryPrefix)
		}
		got.QueryPrefix, want.QueryPrefix = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: options\n got %+v\nwant %+v", tc.name, got, want)
		}
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--corpus", "c"}, "--index"},
		{[]string{"--index", "i", "--port", "70000"}, "--port"},
		{[]string{"--index", "i", "--topk", "0"}, "--topk"},
		{[]string{"--index", "i", "extra"}, "unexpected argument"},
		{[]string{"--index", "i", "--gpu=maybe"}, `takes auto, require or off, not "maybe"`},
		{[]string{"--index", "i", "--gpus", "0,x"}, `"x" is not a GPU ordinal`},
	} {
		if _, err := parseServeFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want one mentioning %q", tc.args, err, tc.err)
		}
	}
}

func TestAdvertisedIP(t *testing.T) {
	if got := advertisedIP("127.0.0.1"); got != "127.0.0.1" {
		t.Errorf("advertisedIP(127.0.0.1) = %s", got)
	}
	if got := advertisedIP("0.0.0.0"); got == "0.0.0.0" || got == "" {
		t.Errorf("advertisedIP(0.0.0.0) = %q, want a dialable address", got)
	}
}
