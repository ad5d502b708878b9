// Command wordnet turns Debian's wordnet-base dictionary (/usr/share/wordnet/data.*) into a
// retrieval benchmark: corpus.jsonl holds one passage per synset (its lemmas as the title and
// its definitions as the text, in the anchors' `"Title"\ntext` form), queries.jsonl holds each
// example sentence of a synset with that synset's corpus row as the gold answer.
//
// With --wiki-like N it writes instead wiki_like.jsonl: N passages of about 100 words (the
// length of wiki-18's passages), each a title and the glosses and examples of consecutive
// synsets, for throughput benchmarks on wiki-sized text.
//
// Usage: go run ./tools/wordnet --out DIR [--dict /usr/share/wordnet] [--limit N] [--wiki-like N]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"needle/internal/atomicfile"
)

// dataFiles are read in this order; it fixes the corpus rows.
var dataFiles = []string{"data.noun", "data.verb", "data.adj", "data.adv"}

// Synset is one parsed data.* line.
type Synset struct {
	Key         string   // pos letter + offset, e.g. "n00001740"
	Lemmas      []string // words with underscores as spaces, adjective markers removed
	Definitions []string // gloss parts that are not examples
	Examples    []string // quoted example sentences, without quotes
}

// ParseLine parses one line of a WordNet data file (wndb(5WN)). License lines (leading
// spaces) return ok=false and no error.
func ParseLine(line string) (s Synset, ok bool, err error) {
	if line == "" || line[0] == ' ' {
		return s, false, nil
	}
	head, gloss, found := strings.Cut(line, " | ")
	if !found {
		return s, false, errors.New("no \" | \" gloss separator")
	}
	f := strings.Fields(head)
	if len(f) < 4 {
		return s, false, fmt.Errorf("%d header fields, want >= 4", len(f))
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return s, false, fmt.Errorf("synset offset %q: not a number", f[0])
	}
	n, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil || n == 0 {
		return s, false, fmt.Errorf("word count %q: want a hex number > 0", f[3])
	}
	if len(f) < 4+2*int(n) {
		return s, false, fmt.Errorf("word count %d, but only %d fields follow", n, len(f)-4)
	}
	pos := f[2]
	if pos == "s" { // adjective satellite: lives in data.adj
		pos = "a"
	}
	s.Key = pos + f[0]
	for i := 0; i < int(n); i++ {
		w := f[4+2*i]
		if j := strings.IndexByte(w, '('); j > 0 && strings.HasSuffix(w, ")") { // "(a)", "(p)", "(ip)"
			w = w[:j]
		}
		s.Lemmas = append(s.Lemmas, strings.ReplaceAll(w, "_", " "))
	}
	s.Definitions, s.Examples = splitGloss(strings.TrimSpace(gloss))
	return s, true, nil
}

// splitGloss splits a gloss at "; " outside quotes into definitions and "quoted" examples.
// An example may carry an attribution after its closing quote ("..." - Shakespeare); it is
// dropped.
func splitGloss(gloss string) (defs, examples []string) {
	inQuote := false
	start := 0
	flush := func(end int) {
		part := strings.TrimSpace(gloss[start:end])
		if part == "" {
			return
		}
		if part[0] == '"' {
			if ex := strings.TrimSpace(strings.SplitN(part[1:], "\"", 2)[0]); ex != "" {
				examples = append(examples, ex)
			}
			return
		}
		defs = append(defs, part)
	}
	for i := 0; i < len(gloss); i++ {
		switch {
		case gloss[i] == '"':
			inQuote = !inQuote
		case gloss[i] == ';' && !inQuote:
			flush(i)
			start = i + 1
		}
	}
	flush(len(gloss))
	return defs, examples
}

// Contents is the passage text of s: `"lemma, lemma"` newline definitions, as the anchors'
// corpus writes `"Title"\ntext`.
func (s Synset) Contents() string {
	return "\"" + strings.Join(s.Lemmas, ", ") + "\"\n" + strings.Join(s.Definitions, "; ")
}

// ReadDict reads every synset of dir's data files in dataFiles order.
func ReadDict(dir string) ([]Synset, error) {
	var all []Synset
	for _, name := range dataFiles {
		path := filepath.Join(dir, name)
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			s, ok, err := ParseLine(sc.Text())
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			if ok {
				all = append(all, s)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no synsets in %v", dir, dataFiles)
	}
	return all, nil
}

// Spread keeps limit synsets evenly spaced over all (all of them if limit <= 0 or >= len),
// so a small subset still covers every part of speech.
func Spread(all []Synset, limit int) []Synset {
	if limit <= 0 || limit >= len(all) {
		return all
	}
	out := make([]Synset, limit)
	for i := range out {
		out[i] = all[i*len(all)/limit]
	}
	return out
}

// corpusRow is one corpus.jsonl line; id is the row number, as in wiki-18.
type corpusRow struct {
	ID       string `json:"id"`
	Contents string `json:"contents"`
	Synset   string `json:"synset"`
}

// Query is one queries.jsonl line: an example sentence and its synset's corpus row.
type Query struct {
	Query  string `json:"query"`
	Gold   int64  `json:"gold"`
	Synset string `json:"synset"`
}

// writeJSONL writes n JSON lines (row(i) for i < n) to path atomically. A file that already
// holds exactly these bytes is left alone, so its mtime stays and `needle build` sees an
// unchanged corpus.
func writeJSONL(path string, n int, row func(i int) any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := 0; i < n; i++ {
		if err := enc.Encode(row(i)); err != nil {
			return err
		}
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, buf.Bytes()) {
		return nil
	}
	return atomicfile.Write(path, buf.Bytes())
}

type passage struct{ contents, synset string }

// WikiLike returns n passages of at least words words: each titled with the first lemma of
// its first synset, its text the definitions and examples of consecutive synsets (wrapping
// around all of them).
func WikiLike(all []Synset, n, words int) []passage {
	out := make([]passage, 0, n)
	next := 0
	for len(out) < n {
		first := all[next%len(all)]
		var text []string
		count := 0
		for count < words {
			s := all[next%len(all)]
			next++
			for _, part := range append(slices.Clone(s.Definitions), s.Examples...) {
				text = append(text, part)
				count += len(strings.Fields(part))
			}
		}
		out = append(out, passage{"\"" + first.Lemmas[0] + "\"\n" + strings.Join(text, ". ") + ".", first.Key})
	}
	return out
}

func run(args []string) error {
	fs := flag.NewFlagSet("wordnet", flag.ContinueOnError)
	dict := fs.String("dict", "/usr/share/wordnet", "WordNet database folder holding data.noun, data.verb, data.adj, data.adv (Debian wordnet-base)")
	out := fs.String("out", "", "output folder for corpus.jsonl and queries.jsonl (created if missing; required)")
	limit := fs.Int("limit", 0, "keep only this many synsets, evenly spaced over all of them (0 = all)")
	wikiLike := fs.Int("wiki-like", 0, "instead write wiki_like.jsonl: this many ~100-word passages for throughput benchmarks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("--out DIR is required and no positional arguments are taken")
	}
	all, err := ReadDict(*dict)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if *wikiLike > 0 {
		passages := WikiLike(all, *wikiLike, 100)
		path := filepath.Join(*out, "wiki_like.jsonl")
		err := writeJSONL(path, len(passages), func(i int) any {
			return corpusRow{ID: strconv.Itoa(i), Contents: passages[i].contents, Synset: passages[i].synset}
		})
		if err == nil {
			fmt.Fprintf(os.Stderr, "wordnet: %d wiki-like passages in %s\n", len(passages), path)
		}
		return err
	}
	synsets := Spread(all, *limit)
	var queries []Query
	for row, s := range synsets {
		for _, ex := range s.Examples {
			queries = append(queries, Query{Query: ex, Gold: int64(row), Synset: s.Key})
		}
	}
	err = writeJSONL(filepath.Join(*out, "corpus.jsonl"), len(synsets), func(i int) any {
		return corpusRow{ID: strconv.Itoa(i), Contents: synsets[i].Contents(), Synset: synsets[i].Key}
	})
	if err != nil {
		return err
	}
	err = writeJSONL(filepath.Join(*out, "queries.jsonl"), len(queries), func(i int) any { return queries[i] })
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wordnet: %d passages, %d queries in %s\n", len(synsets), len(queries), *out)
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "wordnet: %v\n", err)
		os.Exit(1)
	}
}
