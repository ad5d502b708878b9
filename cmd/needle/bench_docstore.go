package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"needle/engine/docstore"
	"needle/engine/docstore/synth"
)

func init() {
	registerBench(benchmark{name: "docstore", summary: "corpus sidecar build vs plain read, row/url lookup, RSS, on a synthetic wiki-like corpus", run: runBenchDocstore})
}

type docstoreBench struct {
	rows    int64
	words   int
	rounds  int
	lookups int
	dir     string
}

func runBenchDocstore(args []string) error {
	var d docstoreBench
	fs := newFlagSet("bench docstore", "[flags]\n\n"+
		"Writes a synthetic wiki-like corpus (wiki-18-shaped rows, ~680 bytes each at --words 100) and measures, in one run:\n"+
		"a plain sequential read of it (baseline), the offsets sidecar build on one core (and the ratio),\n"+
		"random row lookups (ns, allocations), full validation, the url index build and url lookups\n"+
		"(the corpus used as a pages file), and RSS (anonymous/file-backed) around open and lookups.")
	fs.Int64Var(&d.rows, "rows", 1_000_000, "corpus rows to generate")
	fs.IntVar(&d.words, "words", synth.Words, "mean passage length in words (wiki-18: 100); small values test many short rows, e.g. 21M rows as in wiki-18")
	fs.IntVar(&d.rounds, "rounds", 3, "rounds of plain read vs sidecar build (the best of each is reported)")
	fs.IntVar(&d.lookups, "lookups", 1_000_000, "random row and url lookups to time")
	fs.StringVar(&d.dir, "dir", "", "folder for the corpus and its sidecars (default: a temp folder, removed afterwards; kept if given)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if d.rows <= 0 || d.words <= 0 || d.rounds <= 0 || d.lookups <= 0 {
		return errors.New("--rows, --words, --rounds and --lookups must be > 0")
	}
	if d.dir == "" {
		dir, err := os.MkdirTemp("", "needle-bench-docstore")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		d.dir = dir
	}
	return d.run()
}

func (d *docstoreBench) run() error {
	path := filepath.Join(d.dir, "corpus.jsonl")
	start := time.Now()
	size, err := synth.WriteFile(path, d.rows, d.words, 1)
	if err != nil {
		return err
	}
	mb := float64(size) / 1e6
	fmt.Printf("corpus           %d rows, %.1f MB (%.0f bytes/row), written in %.1f s: %s\n",
		d.rows, mb, float64(size)/float64(d.rows), time.Since(start).Seconds(), path)
	if _, err := synth.ReadAll(path); err != nil { // into the page cache, so both sides below read RAM
		return err
	}

	sidecars := filepath.Join(d.dir, "sidecars")
	opt := docstore.Options{SidecarDir: sidecars}
	var read, build span
	for range d.rounds {
		r, err := measure(func() error { _, err := synth.ReadAll(path); return err })
		if err != nil {
			return err
		}
		read = read.best(r)
		os.RemoveAll(sidecars)
		prev := runtime.GOMAXPROCS(1) // the build is one goroutine; keep the GC on that core too
		b, err := measure(func() error {
			c, err := docstore.OpenCorpus(path, opt)
			if err == nil {
				c.Close()
			}
			return err
		})
		runtime.GOMAXPROCS(prev)
		if err != nil {
			return err
		}
		build = build.best(b)
	}
	fmt.Printf("plain read       %7.0f MB/s wall, %7.0f MB/CPU-s  (1 MiB reads, page cache, best of %d)\n",
		mb/read.wall.Seconds(), mb/read.cpu.Seconds(), d.rounds)
	fmt.Printf("sidecar build    %7.0f MB/s wall, %7.0f MB/CPU-s on 1 core = %.2fx / %.2fx plain read (fingerprint + newline scan + write + fsync + rename + mmap)\n",
		mb/build.wall.Seconds(), mb/build.cpu.Seconds(), read.wall.Seconds()/build.wall.Seconds(), read.cpu.Seconds()/build.cpu.Seconds())

	rss0 := readRSS()
	t := time.Now()
	c, err := docstore.OpenCorpus(path, opt)
	if err != nil {
		return err
	}
	defer c.Close()
	open := time.Since(t)
	rss1 := readRSS()
	fmt.Printf("open (fresh)     %7.2f ms   RSS %s -> %s\n", open.Seconds()*1e3, rss0, rss1)

	r := rand.New(rand.NewPCG(2, 3))
	idx := make([]int64, d.lookups)
	for i := range idx {
		idx[i] = r.Int64N(c.Len())
	}
	// The first pass over the rows faults the mapping's pages in (what a fresh server
	// pays); the second is the steady state.
	for _, pass := range []string{"first touch", "warm"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var rowBytes int64
		sp, err := measure(func() error {
			for _, i := range idx {
				row, err := c.Row(i)
				if err != nil {
					return err
				}
				rowBytes += int64(len(row))
			}
			return nil
		})
		if err != nil {
			return err
		}
		runtime.ReadMemStats(&after)
		n := float64(len(idx))
		fmt.Printf("row lookup       %7.0f ns/row wall, %.0f CPU-ns/row, %s, %.3f allocs/row, %d random rows of %.0f bytes (validation included)  RSS %s\n",
			float64(sp.wall.Nanoseconds())/n, float64(sp.cpu.Nanoseconds())/n, pass, float64(after.Mallocs-before.Mallocs)/n,
			len(idx), float64(rowBytes)/n, readRSS())
	}

	var bad []docstore.BadRowError
	sp, err := measure(func() (err error) { bad, err = c.Validate(nil); return })
	if err != nil {
		return err
	}
	fmt.Printf("validate         %7.0f MB/s wall on %d cores, %.0f MB/CPU-s, %d bad rows  RSS %s\n",
		mb/sp.wall.Seconds(), runtime.GOMAXPROCS(0), mb/sp.cpu.Seconds(), len(bad), readRSS())
	return d.pages(path, mb, r)
}

// pages uses the corpus as a pages file (every row has a unique url).
func (d *docstoreBench) pages(path string, mb float64, r *rand.Rand) error {
	var p *docstore.Pages
	sp, err := measure(func() (err error) {
		p, err = docstore.OpenPages(path, docstore.Options{SidecarDir: filepath.Join(d.dir, "pages-sidecars")})
		return
	})
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Printf("url index build  %7.0f MB/s wall on %d cores, %.0f MB/CPU-s (offsets + every line checked + hash table), %d urls\n",
		mb/sp.wall.Seconds(), runtime.GOMAXPROCS(0), mb/sp.cpu.Seconds(), p.Len()-p.BadRows())
	urls, misses := make([]string, d.lookups), make([]string, d.lookups)
	for i := range urls {
		urls[i] = synth.URL(r.Int64N(p.Len()))
		misses[i] = urls[i] + "_"
	}
	lookupAll := func(urls []string, want bool) (span, error) {
		return measure(func() error {
			for _, u := range urls {
				if _, ok := p.Lookup(u); ok != want {
					return fmt.Errorf("Lookup(%s) = %v, want %v", u, ok, want)
				}
			}
			return nil
		})
	}
	n := float64(len(urls))
	for _, pass := range []string{"first touch", "warm"} {
		hit, err := lookupAll(urls, true)
		if err != nil {
			return err
		}
		miss, err := lookupAll(misses, false)
		if err != nil {
			return err
		}
		fmt.Printf("url lookup       %7.0f ns hit, %.0f ns miss wall; %.0f / %.0f CPU-ns, %s  RSS %s (anon includes the bench's %d url strings)\n",
			float64(hit.wall.Nanoseconds())/n, float64(miss.wall.Nanoseconds())/n, float64(hit.cpu.Nanoseconds())/n,
			float64(miss.cpu.Nanoseconds())/n, pass, readRSS(), 2*len(urls))
	}
	return nil
}

// span is the wall-clock and CPU time (all threads, user + system) of one measured call.
// CPU time is what to compare when other processes share the cores.
type span struct{ wall, cpu time.Duration }

func (s span) best(o span) span {
	if s.wall == 0 || o.wall < s.wall {
		s.wall = o.wall
	}
	if s.cpu == 0 || o.cpu < s.cpu {
		s.cpu = o.cpu
	}
	return s
}

func measure(f func() error) (span, error) {
	cpu0, t := processCPU(), time.Now()
	err := f()
	return span{wall: time.Since(t), cpu: processCPU() - cpu0}, err
}

// readRSS returns this process's resident set from /proc/self/status: total, anonymous
// (heap, stacks) and file-backed (mapped corpus/sidecar pages, reclaimable page cache).
func readRSS() string {
	return fmt.Sprintf("%d kB (anon %d, file %d)", procStatusKB("VmRSS"), procStatusKB("RssAnon"), procStatusKB("RssFile"))
}
