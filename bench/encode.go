package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"needle/bench/plot"
	"needle/encoder/bert"
	"needle/encoder/wordpiece"
	"needle/internal/atomicfile"
	"needle/internal/option"
	"needle/internal/procstat"
	"needle/kernels/bert/nn"
)

// EncodeOptions are the flags of `needle bench encode`.
type EncodeOptions struct {
	Model     string // MiniLM model folder; its tokenizer also serves the e5 shape
	Shape     string // both, minilm or e5
	Passages  int    // passages per run
	Queries   int    // single queries timed one by one
	BatchSize int    // texts per forward pass
	Threads   int    // threads of a forward pass (bert.Options.Threads)
	Repeat    int    // passage runs per model; the best counts
	WordNet   string // WordNet noun data file the texts come from
	Dump      string // if set, write the texts as JSON {passages, queries} here and stop
	JSON      bool   // one JSON object instead of a table
	// Precisions of the Linear layers to run, each model at each in turn (default fp16); on
	// the CPU each result adds tokens/s, model GOP/s and its share of the precision's multiply
	// peak measured in the same run (nn.Ops.Peak).
	Precisions []bert.Precision
	// GPU runs the encoders on GPU 0 ("", bert.GPUAuto or bert.GPURequire, as --gpu) and adds
	// tokens/s, model TFLOP/s, the measured GEMM peak and the wiki-18 projection.
	GPU  string
	Plot string // if set, each model's single-query latencies and passages/s are drawn into this .svg or .png file
}

// Specs declares the options (`needle bench encode`'s flags).
func (o *EncodeOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Model, "Model", "model", "", "MiniLM model folder, its tokenizer also serves the e5 shape (default $NEEDLE_MODEL, which the Makefile sets)"),
		option.String(&o.Shape, "Shape", "shape", "both", "which models: both, minilm or e5"),
		option.Num(&o.Passages, "Passages", "passages", 512, option.Above(0), "passages per run"),
		option.Num(&o.Queries, "Queries", "queries", 100, option.Above(0), "single queries timed one by one"),
		option.Num(&o.BatchSize, "BatchSize", "batch-size", 64, option.Above(0), "texts per forward pass"),
		option.Num(&o.Threads, "Threads", "threads", 2, option.Above(0), "threads of a forward pass (the Linears' own thread team and OpenMP's row-wise ops; give bench/encode_pytorch.py the same count)"),
		option.Num(&o.Repeat, "Repeat", "repeat", 3, option.Above(0), "passage runs per model; the best is reported"),
		option.String(&o.WordNet, "WordNet", "wordnet", "/usr/share/wordnet/data.noun", "WordNet noun data file the texts come from"),
		option.String(&o.Dump, "Dump", "dump", "", "write the texts as JSON {passages, queries} to this file and exit"),
		option.Bool(&o.JSON, "JSON", "json", false, "print one JSON object instead of a table"),
		option.Var(precisionsFlag{&o.Precisions}, "Precisions", "precision", "fp16", "comma-separated precisions of the Linear layers to run in turn (fp16, int8, bf16); each result adds tokens/s, model GOP/s and its share of the precision's multiply peak measured on --threads in the same run"),
		option.Var(bert.GPUFlag{Mode: &o.GPU}, "GPU", "gpu", "", "run on GPU 0 (--batch-size then defaults to 512) and add tokens/s, model TFLOP/s and its share of the fp16 GEMM peak measured in the same run, and the wiki-18 projection; "+
			"without a GPU: one line saying why, then the CPU (--gpu=require: an error)"),
		plotSpec(&o.Plot),
	}
}

// precisionsFlag is EncodeOptions.Precisions as a flag: comma-separated.
type precisionsFlag struct{ p *[]bert.Precision }

func (f precisionsFlag) String() string {
	if f.p == nil {
		return ""
	}
	s := make([]string, len(*f.p))
	for i, p := range *f.p {
		s[i] = string(p)
	}
	return strings.Join(s, ",")
}

func (f precisionsFlag) Set(v string) error {
	var ps []bert.Precision
	for _, s := range strings.Split(v, ",") {
		p, err := bert.ParsePrecision(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	*f.p = ps
	return nil
}

// benchTexts are the inputs of `needle bench encode`, also dumped for bench/encode_pytorch.py.
type benchTexts struct {
	Passages []string `json:"passages"`
	Queries  []string `json:"queries"`
}

// wordnetBenchTexts builds real English passages of mixed length from WordNet glosses:
// passage i joins 1 + (7i mod 16) consecutive glosses (about 20 to 350 tokens, so some
// pass the 256-token limit), in the anchors' "Title"\ntext form; query i is the definition
// (the gloss before its first ';') of a later synset. More passages than the glosses make
// (about 9,000) start over from the first gloss: the GPU's runs of 200,000.
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
			if g == 0 {
				return benchTexts{}, fmt.Errorf("%s: %d glosses are too few for %d passages", path, len(glosses), passages)
			}
			g = 0
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
	Precision       string  `json:"precision"`
	Passages        int     `json:"passages"`
	Tokens          int     `json:"tokens"`         // after truncation, specials included
	PassagesPerSec  float64 `json:"passages_per_s"` // best of --repeat runs, wall time
	PassagesPerCPUs float64 `json:"passages_per_cpu_s"`
	QueryMedianMs   float64 `json:"query_median_ms"`
	QueryP90Ms      float64 `json:"query_p90_ms"`
	WeightsMB       float64 `json:"weights_mb"`
	PeakRSSMB       float64 `json:"peak_rss_mb"` // VmHWM of the process after this model
	TokensPerSec    float64 `json:"tokens_per_s"`
	// On the CPU: model GOP/s (Linears and attention, 2 per multiply-add) of the best run, and
	// its share of the multiply peak of the precision's Linear measured on the same threads.
	ModelGOPs float64 `json:"model_GOP_per_s,omitempty"`
	PeakGOPs  float64 `json:"peak_GOP_per_s,omitempty"`
	PeakShare float64 `json:"peak_share,omitempty"`
	// On a GPU: tokens/s and model TFLOP/s of the best run, the measured fp16 GEMM peak and
	// its share, and the hours 21M wiki-18 passages of this run's mean length would take.
	Device         string  `json:"device,omitempty"`
	ModelTFLOPs    float64 `json:"model_TFLOP_per_s,omitempty"`
	PeakGemmTFLOPs float64 `json:"peak_gemm_TFLOP_per_s,omitempty"`
	GemmShare      float64 `json:"gemm_share,omitempty"`
	Wiki18Hours    float64 `json:"wiki18_hours,omitempty"`

	queryLatencies []time.Duration // sorted, for --plot
}

// wiki18Passages is the passage count of the anchors' wiki-18 corpus.
const wiki18Passages = 21_015_324

// Encode encodes real passages of mixed length (WordNet glosses joined) with the real MiniLM
// and an e5-base-shaped model of random weights, and writes passages/s and single-query
// latency to w (or, with opt.Dump, only writes the texts).
func Encode(w io.Writer, opt EncodeOptions) error {
	if err := opt.Specs().Check(); err != nil {
		return err
	}
	if opt.Dump == "" {
		if err := option.Required("Model", opt.Model); err != nil {
			return err
		}
	}
	if opt.Plot != "" {
		if err := plot.Check(opt.Plot); err != nil {
			return err
		}
	}
	texts, err := wordnetBenchTexts(opt.WordNet, opt.Passages, opt.Queries)
	if err != nil {
		return err
	}
	if opt.Dump != "" {
		b, _ := json.Marshal(texts)
		return atomicfile.Write(opt.Dump, b)
	}
	var encoders []func(bert.Precision) (string, *bert.Encoder, error)
	options := func(prec bert.Precision) bert.Options {
		return bert.Options{BatchSize: opt.BatchSize, Threads: opt.Threads, Precision: prec}
	}
	if opt.Shape == "both" || opt.Shape == "minilm" {
		encoders = append(encoders, func(prec bert.Precision) (string, *bert.Encoder, error) {
			e, err := bert.LoadOn(opt.Model, options(prec), opt.GPU, 0, os.Stderr)
			return "all-MiniLM-L6-v2", e, err
		})
	}
	if opt.Shape == "both" || opt.Shape == "e5" {
		encoders = append(encoders, func(prec bert.Precision) (string, *bert.Encoder, error) {
			tok, err := wordpiece.Load(opt.Model)
			if err != nil {
				return "", nil, err
			}
			bopt := options(prec)
			bopt.Pooling = "mean"
			e, err := bert.On(opt.GPU, 0, os.Stderr, bopt, func(o bert.Options) (*bert.Encoder, error) {
				return bert.NewRandom(bert.E5Base, 1, tok, o)
			})
			return "e5-base shape (random)", e, err
		})
	}
	if len(encoders) == 0 {
		return option.Errorf("Shape", "%q, want both, minilm or e5", opt.Shape)
	}
	precisions := opt.Precisions
	if len(precisions) == 0 {
		precisions = []bert.Precision{bert.FP16}
	}
	level, _ := nn.Selected()
	var results []encodeResult
	for _, load := range encoders {
		for _, prec := range precisions {
			name, enc, err := load(prec)
			if err != nil {
				return err
			}
			r, err := measureEncoder(enc, texts, opt.Repeat)
			if err == nil {
				err = throughputFigures(&r, enc, texts, opt.Threads)
			}
			err = errors.Join(err, enc.Close())
			if err != nil {
				return err
			}
			r.Model, r.Precision = name, string(enc.Options().Precision)
			results = append(results, r)
		}
	}
	if opt.Plot != "" {
		if err := plot.Write(opt.Plot, encodeFigure(results, opt, level.Level().String())); err != nil {
			return err
		}
	}
	if opt.JSON {
		b, _ := json.Marshal(map[string]any{"simd": level.Level().String(), "threads": opt.Threads, "batch_size": opt.BatchSize, "results": results}) // one line: the GPU check reads the last
		fmt.Fprintln(w, string(b))
		return nil
	}
	fmt.Fprintf(w, "needle bench encode: SIMD %s, %d threads, batch %d\n", level.Level(), opt.Threads, opt.BatchSize)
	for _, r := range results {
		fmt.Fprintf(w, "%-24s %-4s %4d passages (%d tokens): %7.1f passages/s (%6.1f per CPU-s), %6.0f tokens/s; query median %6.2f ms, p90 %6.2f ms; weights %5.0f MB, peak RSS %5.0f MB\n",
			r.Model, r.Precision, r.Passages, r.Tokens, r.PassagesPerSec, r.PassagesPerCPUs, r.TokensPerSec, r.QueryMedianMs, r.QueryP90Ms, r.WeightsMB, r.PeakRSSMB)
		if r.PeakGOPs > 0 {
			fmt.Fprintf(w, "%-29s model %.1f GOP/s = %.1f%% of the %s multiply peak %.1f GOP/s measured on %d threads\n",
				"", r.ModelGOPs, 100*r.PeakShare, r.Precision, r.PeakGOPs, opt.Threads)
		}
		if r.Device != "" {
			fmt.Fprintf(w, "%-24s on %s: %.0f tokens/s, model %.1f TFLOP/s = %.1f%% of the measured fp16 GEMM peak %.1f TFLOP/s; wiki-18 (21M passages) in %.2f h\n",
				"", r.Device, r.TokensPerSec, r.ModelTFLOPs, 100*r.GemmShare, r.PeakGemmTFLOPs, r.Wiki18Hours)
		}
	}
	return nil
}

// throughputFigures adds to r (measured by measureEncoder) tokens/s and the model's multiply
// rate of the best passage run, and its share of a peak measured now: on a GPU the device's
// fp16 GEMM (TFLOP/s) and the wiki-18 projection; on the CPU the multiply instruction of the
// encoder's precision on the same threads (GOP/s).
func throughputFigures(r *encodeResult, enc *bert.Encoder, texts benchTexts, threads int) error {
	lengths := make([]int, len(texts.Passages))
	for i, p := range texts.Passages {
		lengths[i] = len(enc.Tokenizer().Encode(p, enc.Options().MaxLength))
	}
	seconds := float64(r.Passages) / r.PassagesPerSec
	r.TokensPerSec = float64(r.Tokens) / seconds
	if enc.Device() == nil {
		r.ModelGOPs = enc.FLOPs(lengths) / seconds / 1e9
		if peak := enc.Peak(threads, 0.5); peak > 0 {
			r.PeakGOPs, r.PeakShare = peak/1e9, r.ModelGOPs/(peak/1e9)
		}
		return nil
	}
	peak, err := enc.GemmPeak()
	if err != nil {
		return err
	}
	r.Device = enc.Device().Name()
	r.ModelTFLOPs = enc.FLOPs(lengths) / seconds / 1e12
	r.PeakGemmTFLOPs, r.GemmShare = peak, r.ModelTFLOPs/peak
	r.Wiki18Hours = wiki18Passages / r.PassagesPerSec / 3600
	return nil
}

// encodeFigure is --plot's drawing of results: each model's single-query latencies, and
// passages/s of every model and precision side by side.
func encodeFigure(results []encodeResult, opt EncodeOptions, simd string) plot.Figure {
	f := plot.Figure{
		Title: fmt.Sprintf("needle bench encode: SIMD %s, %d threads, batch %d", simd, opt.Threads, opt.BatchSize),
		Bars:  &plot.Bars{Title: "passages/s (best of --repeat)", Unit: "passages/s"},
	}
	for _, r := range results {
		name := r.Model + " " + r.Precision
		f.Latencies = append(f.Latencies, plot.Latencies{Of: "single query, " + name, D: r.queryLatencies})
		f.Bars.Bars = append(f.Bars.Bars, plot.Bar{Label: name, Value: r.PassagesPerSec})
	}
	return f
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
		t0, c0 := time.Now(), procstat.CPU()
		if _, err := enc.Encode(texts.Passages, ""); err != nil {
			return r, err
		}
		wall, cpu := time.Since(t0).Seconds(), (procstat.CPU() - c0).Seconds()
		r.PassagesPerSec = max(r.PassagesPerSec, float64(len(texts.Passages))/wall)
		r.PassagesPerCPUs = max(r.PassagesPerCPUs, float64(len(texts.Passages))/cpu)
	}
	lat := make([]time.Duration, len(texts.Queries))
	for i, q := range texts.Queries {
		t0 := time.Now()
		if _, err := enc.Encode([]string{q}, ""); err != nil {
			return r, err
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	r.QueryMedianMs, r.QueryP90Ms = percentileMs(lat, .5), percentileMs(lat, .9)
	r.queryLatencies = lat
	r.PeakRSSMB = float64(procstat.KB("VmHWM")) / 1e3
	return r, nil
}
