package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"needle/engine/indexbuild"
	"needle/faissgo"
	"needle/internal/progress"
)

func init() {
	register(command{name: "inspect", summary: "index type, dimension, count, metric; corpus rows, match, bad rows", run: runInspect})
}

func runInspect(args []string) error {
	fs := newFlagSet("inspect", "--index FILE|DIR [--corpus FILE] [--load] [--max-bad 100]\n\n"+
		"Prints the index's FAISS type, dimension, vector count and metric (read from the file's\n"+
		"headers after checking its whole structure: milliseconds for a flat index of any size;\n"+
		"an HNSW graph is scanned), then the corpus's row count, whether it equals the index\n"+
		"count, and the corpus lines that are not JSON objects with a string \"contents\"\n"+
		"(their rows never shift).\n"+
		"Exits with an error when the index and corpus (or manifest) disagree.")
	index := fs.String("index", "", "index file, or a needle build output folder (its manifest.json names the index and corpus) (required)")
	corpus := fs.String("corpus", "", "corpus JSONL whose line i is index row i; default: the manifest's corpus when --index is a folder")
	load := fs.Bool("load", false, "also load the index with FAISS (reads all of it into RAM, except mmapped IVF lists) and report its class")
	maxBad := fs.Int("max-bad", 100, "print at most this many bad corpus lines (the total is always printed); 0 = all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	case *index == "":
		return errors.New("--index is required (see --help)")
	case *maxBad < 0:
		return fmt.Errorf("--max-bad %d: want >= 0", *maxBad)
	}
	return inspect(os.Stdout, inspectArgs{index: *index, corpus: *corpus, load: *load, maxBad: *maxBad})
}

type inspectArgs struct {
	index, corpus string
	load          bool
	maxBad        int
}

// inspect writes the report to w. Problems found in the files (count mismatch) are returned
// after the whole report is written.
func inspect(w io.Writer, a inspectArgs) error {
	indexFile, sidecarDir := a.index, ""
	var manifest *indexbuild.Manifest
	if st, err := os.Stat(a.index); err != nil {
		return err
	} else if st.IsDir() {
		if manifest, err = indexbuild.ReadManifest(a.index); err != nil {
			return err
		}
		indexFile, sidecarDir = filepath.Join(a.index, manifest.IndexFile), a.index
		if a.corpus == "" {
			a.corpus = manifest.Corpus.Path
		}
	}
	info, err := faissgo.Stat(indexFile)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "index:       %s\n", indexFile)
	fmt.Fprintf(w, "type:        %s (file tag %s)\n", info.TypeName(), info.Type)
	fmt.Fprintf(w, "dimension:   %d\n", info.Dim)
	fmt.Fprintf(w, "count:       %d\n", info.Ntotal)
	fmt.Fprintf(w, "metric:      %v\n", info.Metric)
	if a.load {
		if err := reportLoad(w, indexFile); err != nil {
			return err
		}
	}
	var problems []error
	if manifest != nil {
		fmt.Fprintf(w, "manifest:    factory %s, model %q, count %d, dimension %d\n",
			manifest.Factory, manifest.Model, manifest.Count, manifest.Dimension)
		if manifest.Count != info.Ntotal || manifest.Dimension != info.Dim {
			problems = append(problems, fmt.Errorf("manifest says %d vectors of dimension %d, index file holds %d of %d",
				manifest.Count, manifest.Dimension, info.Ntotal, info.Dim))
		}
	}
	if a.corpus != "" {
		rows, err := reportCorpus(w, a.corpus, sidecarDir, a.maxBad)
		if err != nil {
			return err
		}
		if rows == info.Ntotal {
			fmt.Fprintf(w, "match:       yes (index count = corpus rows)\n")
		} else {
			fmt.Fprintf(w, "match:       NO (index count %d, corpus rows %d)\n", info.Ntotal, rows)
			problems = append(problems, fmt.Errorf("index %s has %d vectors but corpus %s has %d rows", indexFile, info.Ntotal, a.corpus, rows))
		}
	}
	return errors.Join(problems...)
}

// reportLoad loads the index with FAISS and prints what FAISS made of it.
func reportLoad(w io.Writer, path string) error {
	x, err := faissgo.Read(path, true)
	if err != nil {
		return err
	}
	defer x.Close()
	fmt.Fprintf(w, "loaded:      %s, %d vectors, trained %v\n", x.TypeName(), x.Ntotal(), x.IsTrained())
	return nil
}

// reportCorpus prints the corpus's rows and bad lines (at most maxBad, 0 = all) and
// returns the row count.
func reportCorpus(w io.Writer, path, sidecarDir string, maxBad int) (int64, error) {
	c, err := openCorpusWithProgress(path, sidecarDir)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var bar *progress.Bar
	bad, err := c.Validate(func(done, total int64) {
		if bar == nil {
			bar = progress.Start(os.Stderr, progress.Options{Label: "corpus rows checked", Total: total})
		}
		bar.Set(done)
	})
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "corpus:      %s\n", path)
	fmt.Fprintf(w, "corpus rows: %d\n", c.Len())
	fmt.Fprintf(w, "bad rows:    %d\n", len(bad))
	for i, b := range bad {
		if maxBad > 0 && i == maxBad {
			fmt.Fprintf(w, "  ... %d more (--max-bad 0 prints all)\n", len(bad)-maxBad)
			break
		}
		fmt.Fprintf(w, "  line %d: %s\n", b.Line, b.Reason)
	}
	return c.Len(), nil
}
