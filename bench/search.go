package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"needle/bench/plot"
	"needle/engine"
	"needle/faissgo"
	"needle/index/flatgpu"
	"needle/internal/option"
	"needle/platform/membw"
)

// SearchOptions are the flags of `needle bench search`.
type SearchOptions struct {
	GPU     bool   // the GPU flat index (index/flatgpu) instead of FAISS on the CPU
	FP32    bool   // GPU: fp32 vectors on the device
	Index   string // a flat index file or `needle build` folder; "" = Rows synthetic vectors
	Rows    int64  // synthetic rows (made on the GPU with --gpu, in RAM for the CPU)
	Dim     int    // synthetic dimension
	Metric  string // synthetic metric: ip or l2
	Batch   int    // queries per search
	K       int    // results per query
	Rounds  int    // timed searches (after one warm-up); the best and median are reported
	Threads int    // CPU threads (0 = all cores)
	Seed    uint64 // vectors and queries
	Plot    string // if set, the rounds' search times and the read bandwidth against the limit are drawn into this .svg or .png file
}

// Specs declares the options (`needle bench search`'s flags).
func (o *SearchOptions) Specs() option.Specs {
	return option.Specs{
		option.Bool(&o.GPU, "GPU", "gpu", false, "the GPU flat index on all visible GPUs (CUDA_VISIBLE_DEVICES) instead of FAISS on the CPU"),
		option.Bool(&o.FP32, "FP32", "gpu-fp32", false, "with --gpu: fp32 vectors on the device (default fp16)"),
		option.String(&o.Index, "Index", "index", "", "a FAISS IndexFlatIP/L2 file or a `needle build` folder with one, instead of synthetic vectors"),
		option.Num(&o.Rows, "Rows", "rows", 200_000, option.Above(0), "synthetic rows (wiki-18: 21015324; on the CPU they are held in RAM: rows x dim x 4 bytes)"),
		option.Num(&o.Dim, "Dim", "dim", 768, option.Above(0), "synthetic dimension"),
		option.String(&o.Metric, "Metric", "metric", "ip", "synthetic metric: ip or l2"),
		option.Num(&o.Batch, "Batch", "batch", 64, option.Above(0), "queries per search"),
		option.Num(&o.K, "K", "k", 10, option.Above(0), "results per query (GPU: up to 8192)"),
		option.Num(&o.Rounds, "Rounds", "rounds", 5, option.Above(0), "timed searches"),
		option.Num(&o.Threads, "Threads", "threads", 0, option.From(0), "CPU threads for FAISS and the bandwidth yardstick (0 = all cores)"),
		option.Num(&o.Seed, "Seed", "seed", 1, option.Any, "seed of the synthetic vectors and the queries"),
		plotSpec(&o.Plot),
	}
}

// searchReport is what Search writes, one JSON object.
type searchReport struct {
	Backend     string  `json:"backend"` // "faiss-cpu" or "gpuflat"
	Device      string  `json:"device"`
	Rows        int64   `json:"rows"`
	Dim         int     `json:"dim"`
	Metric      string  `json:"metric"`
	Batch       int     `json:"batch"`
	K           int     `json:"k"`
	BestSeconds float64 `json:"best_seconds"` // one search of Batch queries
	MedianSecs  float64 `json:"median_seconds"`
	QPS         float64 `json:"qps"`         // Batch / best
	GBps        float64 `json:"GB_per_s"`    // stored vector bytes / best (the matrix is read once per search)
	TFLOPs      float64 `json:"TFLOP_per_s"` // 2 rows dim Batch / best
	PeakReadGB  float64 `json:"peak_read_GB_per_s"`
	PeakTFLOPs  float64 `json:"peak_gemm_TFLOP_per_s,omitempty"` // GPU: cuBLAS fp16 GEMM
	ReadShare   float64 `json:"read_share"`                      // GBps / peak read
	GemmShare   float64 `json:"gemm_share,omitempty"`            // TFLOPs / peak GEMM
	LoadSecs    float64 `json:"load_seconds,omitempty"`          // --index: reading the file into the index
	LoadGBps    float64 `json:"load_GB_per_s,omitempty"`         // --index: vector bytes of the file / load time
}

// Search times exact flat search of Batch queries over a flat index: FAISS on the CPU, or the
// GPU flat index with --gpu, each against its machine's own measured limits (CPU: read
// bandwidth of all threads; GPU: read bandwidth and fp16 GEMM rate, in the same run).
func Search(w io.Writer, opt SearchOptions) error {
	if err := opt.Specs().Check(); err != nil {
		return err
	}
	metric, err := faissgo.ParseMetric(opt.Metric)
	if err != nil {
		return option.Wrap("Metric", err)
	}
	if opt.Plot != "" {
		if err := plot.Check(opt.Plot); err != nil {
			return err
		}
	}
	var (
		idx     engine.Index
		rep     = searchReport{Batch: opt.Batch, K: opt.K}
		elem    = 4.0
		release func()
	)
	began := time.Now()
	if opt.GPU {
		var x *flatgpu.Index
		if opt.Index != "" {
			x, err = flatgpu.Load(opt.Index, flatgpu.Options{FP32: opt.FP32, Progress: w})
		} else {
			x, err = flatgpu.Synthetic(opt.Rows, opt.Dim, metric, opt.Seed, flatgpu.Options{FP32: opt.FP32})
		}
		if err != nil {
			return option.Wrap("GPU", err)
		}
		idx, release, metric = x, x.Close, x.Metric()
		rep.LoadSecs = time.Since(began).Seconds()
		peaks, err := x.Peaks()
		if err != nil {
			x.Close()
			return err
		}
		rep.Backend, rep.Device = "gpuflat", fmt.Sprint(x.Stats().Devices)
		rep.PeakReadGB, rep.PeakTFLOPs = peaks.ReadGBps, peaks.GemmTFLOPs
		if !opt.FP32 {
			elem = 2
		}
	} else {
		faissgo.Init(opt.Threads)
		x, err := cpuFlat(opt, metric)
		if err != nil {
			return err
		}
		idx, release, metric = x, x.Close, x.Metric()
		rep.LoadSecs = time.Since(began).Seconds()
		buf, err := membw.NewBuffer(256 << 20)
		if err != nil {
			x.Close()
			return err
		}
		threads := opt.Threads
		if threads <= 0 {
			threads = runtime.NumCPU()
		}
		rep.Backend, rep.Device = "faiss-cpu", fmt.Sprintf("%d threads", threads)
		rep.PeakReadGB = buf.Bandwidth(threads, 5) / 1e9
	}
	defer release()
	rep.Rows, rep.Dim, rep.Metric = idx.Ntotal(), idx.Dim(), metric.String()
	if opt.Index != "" {
		rep.LoadGBps = float64(rep.Rows) * float64(rep.Dim) * 4 / rep.LoadSecs / 1e9
	} else {
		rep.LoadSecs = 0 // synthetic rows: nothing was read
	}

	q := make([]float32, opt.Batch*idx.Dim())
	rng := rand.New(rand.NewPCG(opt.Seed, 2))
	for i := range q {
		q[i] = rng.Float32()*2 - 1
	}
	dist, labels := make([]float32, opt.Batch*opt.K), make([]int64, opt.Batch*opt.K)
	times := make([]time.Duration, 0, opt.Rounds)
	for r := -1; r < opt.Rounds; r++ { // round -1 warms up
		start := time.Now()
		if err := idx.Search(q, opt.K, dist, labels); err != nil {
			return err
		}
		if r >= 0 {
			times = append(times, time.Since(start))
		}
	}
	slices.Sort(times)
	rep.BestSeconds, rep.MedianSecs = times[0].Seconds(), times[len(times)/2].Seconds()
	rep.QPS = float64(opt.Batch) / rep.BestSeconds
	rep.GBps = float64(rep.Rows) * float64(rep.Dim) * elem / rep.BestSeconds / 1e9
	rep.TFLOPs = 2 * float64(rep.Rows) * float64(rep.Dim) * float64(opt.Batch) / rep.BestSeconds / 1e12
	rep.ReadShare = rep.GBps / rep.PeakReadGB
	if rep.PeakTFLOPs > 0 {
		rep.GemmShare = rep.TFLOPs / rep.PeakTFLOPs
	}
	if opt.Plot != "" {
		if err := plot.Write(opt.Plot, searchFigure(rep, opt, times)); err != nil {
			return err
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// searchFigure is --plot's drawing of a run: the rounds' search times, and the read rate
// next to the machine's limit measured in the same run.
func searchFigure(rep searchReport, opt SearchOptions, times []time.Duration) plot.Figure {
	where := "FAISS on the CPU"
	if opt.GPU {
		where = "GPU flat index"
	}
	return plot.Figure{
		Title:     fmt.Sprintf("needle bench search: %s, %d x %d, batch %d, k %d", where, rep.Rows, rep.Dim, opt.Batch, opt.K),
		Latencies: []plot.Latencies{{Of: fmt.Sprintf("search of %d queries", opt.Batch), D: times}},
		Bars: &plot.Bars{Title: "vectors read per second, best round, against the limit measured in this run", Unit: "GB/s",
			Bars: []plot.Bar{{Label: "needle: " + where, Value: rep.GBps}, {Label: "read limit", Value: rep.PeakReadGB}}},
	}
}

// cpuFlat is FAISS's flat index of opt.Index, or of opt.Rows seeded vectors in [-1, 1).
func cpuFlat(opt SearchOptions, metric faissgo.Metric) (*faissgo.Index, error) {
	if opt.Index != "" {
		file, _, err := flatgpu.FlatFile(opt.Index)
		if err != nil {
			return nil, err
		}
		return faissgo.Read(file, false)
	}
	x, err := faissgo.New(opt.Dim, "Flat", metric)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 1))
	chunk := make([]float32, min(opt.Rows, 1<<16)*int64(opt.Dim))
	for added := int64(0); added < opt.Rows; {
		n := min(opt.Rows-added, int64(len(chunk)/opt.Dim))
		v := chunk[:n*int64(opt.Dim)]
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		if err := x.Add(v); err != nil {
			x.Close()
			return nil, err
		}
		added += n
	}
	return x, nil
}
