package indexbuild

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"needle/index/indexdir"

	"needle/faissgo"
	"needle/internal/progress"
	"needle/internal/writer"
)

// InspectOptions say what `needle inspect` looks at.
type InspectOptions struct {
	Index  string    // an index file, or a needle build folder (its manifest names the index and corpus)
	Corpus string    // the corpus whose line i is index row i ("": a build folder's)
	Load   bool      // also load the index with FAISS and report its class
	MaxBad int       // print at most this many bad corpus lines (0: all)
	Log    io.Writer // progress bars; nil: discarded
}

// Inspect prints to w the index's FAISS type, dimension, vector count and metric, then the
// corpus's row count, whether it equals the index count, and its bad lines (at most MaxBad).
// Problems found in the files (count mismatch) are returned after the whole report is written.
func Inspect(w io.Writer, a InspectOptions) error {
	indexFile, sidecarDir := a.Index, ""
	var manifest *indexdir.Manifest
	if st, err := os.Stat(a.Index); err != nil {
		return err
	} else if st.IsDir() {
		if manifest, err = indexdir.ReadManifest(a.Index); err != nil {
			return err
		}
		indexFile, sidecarDir = filepath.Join(a.Index, manifest.IndexFile), a.Index
		if a.Corpus == "" {
			a.Corpus = manifest.Corpus.Path
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
	if a.Load {
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
	if a.Corpus != "" {
		rows, err := reportCorpus(w, a.Corpus, sidecarDir, a.MaxBad, writer.OrDiscard(a.Log))
		if err != nil {
			return err
		}
		if rows == info.Ntotal {
			fmt.Fprintf(w, "match:       yes (index count = corpus rows)\n")
		} else {
			fmt.Fprintf(w, "match:       NO (index count %d, corpus rows %d)\n", info.Ntotal, rows)
			problems = append(problems, fmt.Errorf("index %s has %d vectors but corpus %s has %d rows", indexFile, info.Ntotal, a.Corpus, rows))
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
func reportCorpus(w io.Writer, path, sidecarDir string, maxBad int, log io.Writer) (int64, error) {
	c, err := OpenCorpus(path, sidecarDir, log)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var bar *progress.Bar
	bad, err := c.Validate(func(done, total int64) {
		if bar == nil {
			bar = progress.Start(log, progress.Options{Label: "corpus rows checked", Total: total})
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
			fmt.Fprintf(w, "  ... %d more not printed (a limit of 0 prints all)\n", len(bad)-maxBad)
			break
		}
		fmt.Fprintf(w, "  line %d: %s\n", b.Line, b.Reason)
	}
	return c.Len(), nil
}
