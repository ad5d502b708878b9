package doctor

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"needle/encoder/bert"
	"needle/engine"
	"needle/faissgo"
	"needle/index/compact"
	"needle/index/indexdir"
)

// served checks what `needle serve --index index --model model` would load: engine.Resolve
// decides as serve does (manifest, prefix, precision), the index header and the corpus are
// checked against the manifest, and the model is loaded.
func served(index, model string) []Check {
	var out []Check
	opts := engine.Options{Index: index, Model: model}
	dim := 0
	if index != "" {
		resolved, err := engine.Resolve(opts)
		if err != nil {
			return append(out, Check{Name: "index", Status: Missing, Value: index, Why: err.Error()})
		}
		opts = resolved
		var m *indexdir.Manifest
		if info, err := os.Stat(index); err == nil && info.IsDir() && !compact.IsForm(index) {
			m, _ = indexdir.ReadManifest(index) // Resolve read it already
		}
		var c Check
		c, dim = indexFile(opts.Index, m)
		out = append(out, c)
		if m != nil {
			out = append(out, corpus(m))
		}
		out = append(out, Check{Name: "prefix", Status: OK, Value: fmt.Sprintf("queries %q", *opts.QueryPrefix), Why: prefixWhy(m)})
	}
	if opts.Model == "" {
		return out
	}
	return append(out, loadModel(opts, dim))
}

// indexFile checks the index header, and its agreement with the manifest m (nil: none).
func indexFile(path string, m *indexdir.Manifest) (Check, int) {
	if compact.IsForm(path) {
		form, err := compact.ReadForm(path)
		if err != nil {
			return Check{Name: "index", Status: Missing, Value: path, Why: err.Error()}, 0
		}
		return indexFile(form.Source.Path, m)
	}
	info, err := faissgo.Stat(path)
	if err != nil {
		return Check{Name: "index", Status: Missing, Value: path, Why: err.Error()}, 0
	}
	c := Check{Name: "index", Status: OK, Value: fmt.Sprintf("%s: %s, %d vectors of dimension %d, metric %s", path, info.Type, info.Ntotal, info.Dim, info.Metric)}
	switch {
	case m == nil:
		c.Why = "a bare index file: corpus and model come from the flags"
	case m.Dimension != info.Dim || m.Count != info.Ntotal:
		c.Status, c.Why = Missing, fmt.Sprintf("the manifest says %d vectors of dimension %d: the folder is not one build", m.Count, m.Dimension)
	default:
		c.Why = fmt.Sprintf("agrees with manifest.json (%s, built by needle %s at precision %s)", m.Factory, m.NeedleVersion, cmp.Or(m.Precision, "fp16"))
	}
	return c, info.Dim
}

// corpus compares the corpus file with what the manifest recorded. The full hash is `needle
// build`'s check (seconds per GB); doctor compares size and modification time.
func corpus(m *indexdir.Manifest) Check {
	c := Check{Name: "corpus", Value: m.Corpus.Path}
	info, err := os.Stat(m.Corpus.Path)
	switch {
	case err != nil:
		c.Status, c.Why = Missing, err.Error()
	case info.Size() != m.Corpus.Size || info.ModTime().UnixNano() != m.Corpus.Mtime:
		c.Status, c.Why = Missing, fmt.Sprintf("changed since the build: %d bytes modified %s, the manifest recorded %d bytes modified %s (hash %s); rebuild, or serve the corpus the index was built from",
			info.Size(), info.ModTime().Format(time.RFC3339), m.Corpus.Size, time.Unix(0, m.Corpus.Mtime).Format(time.RFC3339), m.Corpus.Hash)
	default:
		c.Status, c.Why = OK, fmt.Sprintf("%d bytes, size and modification time as recorded with hash %s (`needle build` re-hashes it; doctor does not)", info.Size(), m.Corpus.Hash)
	}
	return c
}

// prefixWhy says where the query prefix came from.
func prefixWhy(m *indexdir.Manifest) string {
	if m == nil {
		return "no manifest: none unless --query-prefix or an e5 --retriever_name"
	}
	return fmt.Sprintf("passages were encoded with prefix %q (manifest); serve picks the query prefix from it", m.Prefix)
}

// loadModel loads the encoder as serve would and checks its width against the index's (0:
// no index).
func loadModel(opts engine.Options, indexDim int) Check {
	precision := cmp.Or(opts.Precision, string(bert.FP16))
	start := time.Now()
	enc, err := bert.Load(opts.Model, bert.Options{Precision: bert.Precision(precision), Pooling: opts.Pooling, BatchSize: 1})
	if err != nil {
		return Check{Name: "model", Status: Missing, Value: opts.Model, Why: err.Error()}
	}
	defer enc.Close()
	c := Check{Name: "model", Status: OK, Value: fmt.Sprintf("%s: dimension %d, %s, %.0f MB of weights", filepath.Clean(opts.Model), enc.Dim(), precision, float64(enc.WeightBytes())/1e6),
		Why: fmt.Sprintf("loaded in %.2f s", time.Since(start).Seconds())}
	if indexDim != 0 && indexDim != enc.Dim() {
		c.Status, c.Why = Missing, fmt.Sprintf("the model encodes %d dimensions, the index holds %d: not the model the index was built with", enc.Dim(), indexDim)
	}
	return c
}
