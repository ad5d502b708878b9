package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"needle/engine/bert"
	"needle/engine/wordpiece"
	"needle/internal/atomicfile"
	"needle/kernels/retrieval/nn"
)

func init() {
	registerBench(benchmark{name: "encode", summary: "BERT encoder: passages/s at batch 64 and single-query latency (MiniLM, e5-base shape)", run: runBenchEncode})
}

// benchTexts are the inputs of `needle bench encode`, also dumped for bench/encode_pytorch.py.
type benchTexts struct {
	Passages []string `json:"passages"`
	Queries  []string `json:"queries"`
}

// wordnetBenchTexts builds real English passages of mixed length from WordNet glosses:
// passage i joins 1 + (7i mod 16) consecutive glosses (about 20 to 350 tokens, so some
// pass the 256-token limit), in the anchors' "Title"\ntext form; query i is the definition
// (the gloss before its first ';') of a later synset.
func wordnetBenchTexts(path string, passages, queries int) (benchTexts, error) {
	f, err := os.Open(path)
	if err != nil {
		return benchTexts{}, fmt.Errorf("%w (wordnet-base provides it)", err)
	}
	defer f.Close()
	var glosses []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if _, gloss, ok := strings.Cut(sc.Text(), " | "); ok && sc.Text()[0] != ' ' {
			glosses = append(glosses, strings.TrimSpace(gloss))
		}
	}
	if err := sc.Err(); err != nil {
		return benchTexts{}, fmt.Errorf("%s: %w", path, err)
	}
	var t benchTexts
	g := 0
	for i := 0; i < passages; i++ {
		k := 1 + 7*i%16
		if g+k+queries > len(glosses) {
			return benchTexts{}, fmt.Errorf("%s: %d glosses are too few for %d passages", path, len(glosses), passages)
		}
		title, _, _ := strings.Cut(glosses[g], ";")
		t.Passages = append(t.Passages, strconv.Quote(title)+"\n"+strings.Join(glosses[g:g+k], " "))
		g += k
	}
	for i := 0; i < queries; i++ {
		def, _, _ := strings.Cut(glosses[g+i], ";")
		t.Queries = append(t.Queries, def)
	}
	return t, nil
}

// encodeResult is one model's figures (the --json record).
type encodeResult struct {
	Model           string  `json:"model"`
	Passages        int     `json:"passages"`
	Tokens          int     `json:"tokens"`         // after truncation, specials included
	PassagesPerSec  float64 `json:"passages_per_s"` // best of --repeat runs, wall time
	PassagesPerCPUs float64 `json:"passages_per_cpu_s"`
	QueryMedianMs   float64 `json:"query_median_ms"`
	QueryP90Ms      float64 `json:"query_p90_ms"`
	WeightsMB       float64 `json:"weights_mb"`
	PeakRSSMB       float64 `json:"peak_rss_mb"` // VmHWM of the process after this model
}

func runBenchEncode(args []string) error {
	fs := newFlagSet("bench encode", "[--model DIR] [--shape both|minilm|e5] [--passages 512] [--queries 100] [--threads 2] [--json]\n\n"+
		"Encodes real passages of mixed length (WordNet glosses joined, /usr/share/wordnet) with\n"+
		"--batch-size texts per forward pass and reports passages/s (best of --repeat, wall and per\n"+
		"CPU-second), then the latency of single queries (median, p90). Shapes: the real MiniLM at\n"+
		"--model and an e5-base-v2-shaped model (12 x 768, 12 heads, FFN 3072) with seeded random\n"+
		"weights (same cost as the real one). --dump writes the texts for bench/encode_pytorch.py.\n"+
		"Peak RSS is the process's: run one --shape at a time to read it per model.")
	model := fs.String("model", os.Getenv("NEEDLE_MODEL"), "MiniLM model folder, its tokenizer also serves the e5 shape (default $NEEDLE_MODEL, which the Makefile sets)")
	shape := fs.String("shape", "both", "which models: both, minilm or e5")
	passages := fs.Int("passages", 512, "passages per run")
	queries := fs.Int("queries", 100, "single queries timed one by one")
	batch := fs.Int("batch-size", 64, "texts per forward pass")
	threads := fs.Int("threads", 2, "OpenBLAS/OpenMP threads (PyTorch: torch.set_num_threads)")
	repeat := fs.Int("repeat", 3, "passage runs per model; the best is reported")
	wordnet := fs.String("wordnet", "/usr/share/wordnet/data.noun", "WordNet noun data file the texts come from")
	dump := fs.String("dump", "", "write the texts as JSON {passages, queries} to this file and exit")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if *passages <= 0 || *queries <= 0 || *batch <= 0 || *threads <= 0 || *repeat <= 0 {
		return errors.New("--passages, --queries, --batch-size, --threads and --repeat must be > 0")
	}
	if *model == "" && *dump == "" {
		return errors.New("--model is required (or set NEEDLE_MODEL)")
	}
	texts, err := wordnetBenchTexts(*wordnet, *passages, *queries)
	if err != nil {
		return err
	}
	if *dump != "" {
		b, _ := json.Marshal(texts)
		return atomicfile.Write(*dump, b)
	}
	opt := bert.Options{BatchSize: *batch, Threads: *threads}
	var encoders []func() (string, *bert.Encoder, error)
	if *shape == "both" || *shape == "minilm" {
		encoders = append(encoders, func() (string, *bert.Encoder, error) {
			e, err := bert.Load(*model, opt)
			return "all-MiniLM-L6-v2", e, err
		})
	}
	if *shape == "both" || *shape == "e5" {
		encoders = append(encoders, func() (string, *bert.Encoder, error) {
			tok, err := wordpiece.Load(*model)
			if err != nil {
				return "", nil, err
			}
			opt.Pooling = "mean"
			e, err := bert.NewRandom(bert.E5Base, 1, tok, opt)
			return "e5-base shape (random)", e, err
		})
	}
	if len(encoders) == 0 {
		return fmt.Errorf("--shape %q: want both, minilm or e5", *shape)
	}
	level, _ := nn.Selected()
	var results []encodeResult
	for _, load := range encoders {
		name, enc, err := load()
		if err != nil {
			return err
		}
		r, err := measureEncoder(enc, texts, *repeat)
		if err != nil {
			return err
		}
		r.Model = name
		results = append(results, r)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(map[string]any{"simd": level.Level().String(), "threads": *threads, "batch_size": *batch, "results": results}, "", "  ")
		fmt.Println(string(b))
		return nil
	}
	fmt.Printf("needle bench encode: SIMD %s, %d threads, batch %d\n", level.Level(), *threads, *batch)
	for _, r := range results {
		fmt.Printf("%-24s %4d passages (%d tokens): %7.1f passages/s (%6.1f per CPU-s); query median %6.2f ms, p90 %6.2f ms; weights %5.0f MB, peak RSS %5.0f MB\n",
			r.Model, r.Passages, r.Tokens, r.PassagesPerSec, r.PassagesPerCPUs, r.QueryMedianMs, r.QueryP90Ms, r.WeightsMB, r.PeakRSSMB)
	}
	return nil
}

func measureEncoder(enc *bert.Encoder, texts benchTexts, repeat int) (encodeResult, error) {
	r := encodeResult{Passages: len(texts.Passages), WeightsMB: float64(enc.WeightBytes()) / 1e6}
	for _, p := range texts.Passages {
		r.Tokens += len(enc.Tokenizer().Encode(p, enc.Options().MaxLength))
	}
	if _, err := enc.Encode(texts.Passages[:min(64, len(texts.Passages))], ""); err != nil { // warm-up
		return r, err
	}
	for i := 0; i < repeat; i++ {
		t0, c0 := time.Now(), processCPU()
		if _, err := enc.Encode(texts.Passages, ""); err != nil {
			return r, err
		}
		wall, cpu := time.Since(t0).Seconds(), (processCPU() - c0).Seconds()
		r.PassagesPerSec = max(r.PassagesPerSec, float64(len(texts.Passages))/wall)
		r.PassagesPerCPUs = max(r.PassagesPerCPUs, float64(len(texts.Passages))/cpu)
	}
	lat := make([]float64, len(texts.Queries))
	for i, q := range texts.Queries {
		t0 := time.Now()
		if _, err := enc.Encode([]string{q}, ""); err != nil {
			return r, err
		}
		lat[i] = time.Since(t0).Seconds() * 1e3
	}
	slices.Sort(lat)
	r.QueryMedianMs, r.QueryP90Ms = lat[len(lat)/2], lat[len(lat)*9/10]
	r.PeakRSSMB = float64(procStatusKB("VmHWM")) / 1e3
	return r, nil
}

// procStatusKB reads one "Name: N kB" field of /proc/self/status (0 if absent).
func procStatusKB(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
