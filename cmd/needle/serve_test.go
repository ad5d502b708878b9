package main

import (
	"os"
	"path/filepath"
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
	const cache = 256 << 20 // --cache-mb's default
	for _, tc := range []struct {
		name string
		args []string
		want engine.Options
	}{
		{"defaults", []string{"--index", "dir"}, engine.Options{Index: "dir", Batcher: defaults, CacheBytes: cache}},
		{"cache off", []string{"--index", "dir", "--cache-mb", "0"}, engine.Options{Index: "dir", Batcher: defaults}},
		{"explicit empty prefix is kept", []string{"--index", "dir", "--query-prefix", ""},
			engine.Options{Index: "dir", QueryPrefix: &empty, Batcher: defaults, CacheBytes: cache}},
		{"anchor aliases, e5 name", []string{"--index_path", "x.index", "--corpus_path", "c.jsonl", "--retriever_model", "/m/e5-base-v2",
			"--pages_path", "p.jsonl", "--retriever_name", "e5", "--faiss_gpu", "--topk", "3", "--port", "8001"},
			engine.Options{Index: "x.index", Corpus: "c.jsonl", Model: "/m/e5-base-v2", Pages: "p.jsonl", RetrieverName: "e5", GPU: engine.GPUAuto, Batcher: defaults, CacheBytes: cache}},
		{"--gpu alone", []string{"--index", "i", "--gpu"}, engine.Options{Index: "i", GPU: engine.GPUAuto, Batcher: defaults, CacheBytes: cache}},
		{"--gpu=require on two GPUs in fp32", []string{"--index", "i", "--gpu=require", "--gpus", "0, 2", "--gpu-fp32"},
			engine.Options{Index: "i", GPU: engine.GPURequire, GPUs: []int{0, 2}, GPUFP32: true, Batcher: defaults, CacheBytes: cache}},
		{"--gpu=off wins over --faiss_gpu", []string{"--index", "i", "--gpu=off", "--faiss_gpu"}, engine.Options{Index: "i", Batcher: defaults, CacheBytes: cache}},
		{"engine settings", []string{"--index", "i", "--threads", "2", "--mmap", "--max-batch", "8", "--batch-wait", "2ms",
			"--encoders", "2", "--max-queued", "100", "--cache-mb", "3", "--index-backend", "mapped"},
			engine.Options{Index: "i", Threads: 2, Mmap: true, Backend: engine.BackendMapped, Batcher: engine.BatcherOptions{MaxBatch: 8, MaxWait: 2 * time.Millisecond, MaxQueued: 100, Encoders: 2},
				CacheBytes: 3 << 20}},
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
		want.Fusion.Weight = 0.5 // --fusion-weight's default, whatever the method
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
		{[]string{"--index", "i", "--cache-mb", "-1"}, "--cache-mb: -1, want >= 0"},
		{[]string{"--index", "i", "--replace", "--port", "0"}, "--replace: with port 0"},
	} {
		if _, err := parseServeFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want one mentioning %q", tc.args, err, tc.err)
		}
	}
}

// A limit of 0 or below is refused by the library that owns it, with the flag's name; where 0
// means something (--batch-wait, --threads, --load-wait, --cache-mb) only negative values are.
func TestServeFlagsRefuseNonPositiveLimits(t *testing.T) {
	for _, name := range []string{"max-batch", "max-queued", "encoders", "max-queries", "max-topk", "max-hits", "max-body", "max-conns",
		"read-timeout", "write-timeout", "idle-timeout", "drain", "batch-wait", "threads", "load-wait", "cache-mb", "topk", "nprobe"} {
		values := []string{"0", "-1"}
		if strings.HasSuffix(name, "timeout") || name == "drain" || name == "batch-wait" || name == "load-wait" {
			values = []string{"0s", "-1s"}
		}
		zeroOK := name == "batch-wait" || name == "threads" || name == "load-wait" || name == "cache-mb" || name == "nprobe"
		for i, v := range values {
			_, err := parseServeFlags([]string{"--index", "i", "--" + name, v})
			if i == 0 && zeroOK {
				if err != nil {
					t.Errorf("--%s %s: %v, want accepted", name, v, err)
				}
				continue
			}
			if err == nil || !strings.HasPrefix(err.Error(), "--"+name+": "+v+", want ") {
				t.Errorf("--%s %s: error %v, want one naming --%s", name, v, err, name)
			}
		}
	}
}

// --token-file gives the bearer token from a file (the weights daemons' file); with
// --auth-token too it is an error.
func TestServeTokenFile(t *testing.T) {
	t.Setenv("NEEDLE_AUTH_TOKEN", "")
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := parseServeFlags([]string{"--index", "i", "--token-file", path})
	if err != nil || f.server.AuthToken != "s3cret" {
		t.Fatalf("token %q, %v", f.server.AuthToken, err)
	}
	if _, err := parseServeFlags([]string{"--index", "i", "--token-file", path, "--auth-token", "x"}); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Fatalf("both: %v", err)
	}
}
