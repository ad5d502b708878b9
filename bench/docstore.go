package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"needle/bench/synth"
	"needle/docstore"
	"needle/internal/option"
)

// DocstoreOptions are the flags of `needle bench docstore`.
type DocstoreOptions struct {
	Rows    int64  // corpus rows to generate
	Words   int    // mean passage length in words
	Rounds  int    // rounds of plain read vs sidecar build; the best of each counts
	Lookups int    // random row and url lookups to time
	Dir     string // folder for the corpus and its sidecars; "" = a temp folder, removed afterwards
}

// Specs declares the options (`needle bench docstore`'s flags).
func (o *DocstoreOptions) Specs() option.Specs {
	return option.Specs{
		option.Num(&o.Rows, "Rows", "rows", 1_000_000, option.Above(0), "corpus rows to generate"),
		option.Num(&o.Words, "Words", "words", synth.Words, option.Above(0), "mean passage length in words (wiki-18: 100); small values test many short rows, e.g. 21M rows as in wiki-18"),
		option.Num(&o.Rounds, "Rounds", "rounds", 3, option.Above(0), "rounds of plain read vs sidecar build (the best of each is reported)"),
		option.Num(&o.Lookups, "Lookups", "lookups", 1_000_000, option.Above(0), "random row and url lookups to time"),
		option.String(&o.Dir, "Dir", "dir", "", "folder for the corpus and its sidecars (default: a temp folder, removed afterwards; kept if given)"),
	}
}

// Docstore writes a synthetic wiki-like corpus and measures, in one run, a plain read of it
// (the baseline), the offsets sidecar build, row lookups, validation, the url index and url
// lookups, and RSS; the report goes to w.
func Docstore(w io.Writer, opt DocstoreOptions) error {
	if err := opt.Specs().Check(); err != nil {
		return err
	}
	if opt.Dir == "" {
		dir, err := os.MkdirTemp("", "needle-bench-docstore")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		opt.Dir = dir
	}
	d := docstoreBench{DocstoreOptions: opt, w: w}
	return d.run()
}

type docstoreBench struct {
	DocstoreOptions
	w io.Writer
}

func (d *docstoreBench) run() error {
	path := filepath.Join(d.Dir, "corpus.jsonl")
	start := time.Now()
	size, err := synth.WriteFile(path, d.Rows, d.Words, 1)
	if err != nil {
		return err
	}
	mb := float64(size) / 1e6
	fmt.Fprintf(d.w, "corpus           %d rows, %.1f MB (%.0f bytes/row), written in %.1f s: %s\n",
		d.Rows, mb, float64(size)/float64(d.Rows), time.Since(start).Seconds(), path)
	if _, err := synth.ReadAll(path); err != nil { // into the page cache, so both sides below read RAM
		return err
	}

	sidecars := filepath.Join(d.Dir, "sidecars")
	opt := docstore.Options{SidecarDir: sidecars}
	var read, build span
	for range d.Rounds {
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
	fmt.Fprintf(d.w, "plain read       %7.0f MB/s wall, %7.0f MB/CPU-s  (1 MiB reads, page cache, best of %d)\n",
		mb/read.wall.Seconds(), mb/read.cpu.Seconds(), d.Rounds)
	fmt.Fprintf(d.w, "sidecar build    %7.0f MB/s wall, %7.0f MB/CPU-s on 1 core = %.2fx / %.2fx plain read (fingerprint + newline scan + write + fsync + rename + mmap)\n",
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
	fmt.Fprintf(d.w, "open (fresh)     %7.2f ms   RSS %s -> %s\n", open.Seconds()*1e3, rss0, rss1)

	r := rand.New(rand.NewPCG(2, 3))
	idx := make([]int64, d.Lookups)
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
		fmt.Fprintf(d.w, "row lookup       %7.0f ns/row wall, %.0f CPU-ns/row, %s, %.3f allocs/row, %d random rows of %.0f bytes (validation included)  RSS %s\n",
			float64(sp.wall.Nanoseconds())/n, float64(sp.cpu.Nanoseconds())/n, pass, float64(after.Mallocs-before.Mallocs)/n,
			len(idx), float64(rowBytes)/n, readRSS())
	}

	var bad []docstore.BadRowError
	sp, err := measure(func() (err error) { bad, err = c.Validate(nil); return })
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "validate         %7.0f MB/s wall on %d cores, %.0f MB/CPU-s, %d bad rows  RSS %s\n",
		mb/sp.wall.Seconds(), runtime.GOMAXPROCS(0), mb/sp.cpu.Seconds(), len(bad), readRSS())
	return d.pages(path, mb, r)
}

// pages uses the corpus as a pages file (every row has a unique url).
func (d *docstoreBench) pages(path string, mb float64, r *rand.Rand) error {
	var p *docstore.Pages
	sp, err := measure(func() (err error) {
		p, err = docstore.OpenPages(path, docstore.Options{SidecarDir: filepath.Join(d.Dir, "pages-sidecars")})
		return
	})
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(d.w, "url index build  %7.0f MB/s wall on %d cores, %.0f MB/CPU-s (offsets + every line checked + hash table), %d urls\n",
		mb/sp.wall.Seconds(), runtime.GOMAXPROCS(0), mb/sp.cpu.Seconds(), p.Len()-p.BadRows())
	urls, misses := make([]string, d.Lookups), make([]string, d.Lookups)
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
		fmt.Fprintf(d.w, "url lookup       %7.0f ns hit, %.0f ns miss wall; %.0f / %.0f CPU-ns, %s  RSS %s (anon includes the bench's %d url strings)\n",
			float64(hit.wall.Nanoseconds())/n, float64(miss.wall.Nanoseconds())/n, float64(hit.cpu.Nanoseconds())/n,
			float64(miss.cpu.Nanoseconds())/n, pass, readRSS(), 2*len(urls))
	}
	return nil
}
