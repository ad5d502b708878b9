package docstore

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"needle/docstore/synth"
)

// The benchmarks share one synthetic wiki-like corpus, written on first use:
// NEEDLE_BENCH_ROWS rows (default 1M, ~0.73 GB), removed by TestMain.
var benchData struct {
	once sync.Once
	dir  string
	path string
	size int64
	rows int64
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchData.dir != "" {
		os.RemoveAll(benchData.dir)
	}
	os.Exit(code)
}

func benchCorpus(b *testing.B) (path string, size, rows int64) {
	benchData.once.Do(func() {
		benchData.rows = 1_000_000
		if s := os.Getenv("NEEDLE_BENCH_ROWS"); s != "" {
			benchData.rows, benchData.err = strconv.ParseInt(s, 10, 64)
		}
		if benchData.dir, benchData.err = os.MkdirTemp("", "needle-docstore-bench"); benchData.err != nil {
			return
		}
		benchData.path = filepath.Join(benchData.dir, "corpus.jsonl")
		benchData.size, benchData.err = synth.WriteFile(benchData.path, benchData.rows, synth.Words, 1)
	})
	if benchData.err != nil {
		b.Fatal(benchData.err)
	}
	return benchData.path, benchData.size, benchData.rows
}

// BenchmarkPlainRead is the baseline of BenchmarkSidecarBuild: the same file read the same
// way, doing nothing with the bytes.
func BenchmarkPlainRead(b *testing.B) {
	path, size, _ := benchCorpus(b)
	b.SetBytes(size)
	for b.Loop() {
		if _, err := synth.ReadAll(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSidecarBuild opens the corpus with no sidecar, on one core: fingerprint, newline
// scan, sidecar write + fsync + rename, mmap.
func BenchmarkSidecarBuild(b *testing.B) {
	path, size, _ := benchCorpus(b)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	opt := Options{SidecarDir: b.TempDir()}
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		os.Remove(filepath.Join(opt.SidecarDir, filepath.Base(path)+offsetsExt))
		b.StartTimer()
		c, err := OpenCorpus(path, opt)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func randomRows(n int, rows int64) []int64 {
	r := rand.New(rand.NewPCG(2, 3))
	idx := make([]int64, n)
	for i := range idx {
		idx[i] = r.Int64N(rows)
	}
	return idx
}

// openBenchCorpus opens the benchmark corpus (building its sidecar before the timer starts).
func openBenchCorpus(b *testing.B) (c *Corpus, size int64) {
	path, size, _ := benchCorpus(b)
	c, err := OpenCorpus(path, Options{SidecarDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, size
}

// BenchmarkRow looks up random rows (lazy validation included).
func BenchmarkRow(b *testing.B) {
	c, _ := openBenchCorpus(b)
	idx := randomRows(1<<16, c.Len())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := c.Row(idx[i&(len(idx)-1)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkValidate checks every row on all cores.
func BenchmarkValidate(b *testing.B) {
	c, size := openBenchCorpus(b)
	b.SetBytes(size)
	for b.Loop() {
		if bad, err := c.Validate(nil); err != nil || len(bad) > 0 {
			b.Fatal(bad, err)
		}
	}
}

// BenchmarkPagesLookup looks up random urls of the corpus used as a pages file.
func BenchmarkPagesLookup(b *testing.B) {
	path, _, rows := benchCorpus(b)
	p, err := OpenPages(path, Options{SidecarDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var urls []string
	for _, i := range randomRows(1<<16, rows) {
		urls = append(urls, synth.URL(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := p.Lookup(urls[i&(len(urls)-1)]); !ok {
			b.Fatal("miss")
		}
		i++
	}
}

// BenchmarkRowCheck compares the row check (one pass: syntax, UTF-8, the contents field)
// with encoding/json.Valid alone, on the rows of a synthetic corpus.
func BenchmarkRowCheck(b *testing.B) {
	var buf bytes.Buffer
	if err := synth.Write(&buf, 1024, synth.Words, 1); err != nil {
		b.Fatal(err)
	}
	rows := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	for name, check := range map[string]func([]byte) bool{
		"stringField":       func(r []byte) bool { _, _, reason := stringField(r, "contents"); return reason == "" },
		"encodingJSONValid": json.Valid,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(buf.Len() / len(rows)))
			i := 0
			for b.Loop() {
				if !check(rows[i&(len(rows)-1)]) {
					b.Fatal("bad row")
				}
				i++
			}
		})
	}
}
