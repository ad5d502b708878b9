package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"needle/cuda"
	"needle/internal/option"
	"needle/internal/procstat"
	"needle/kernels/trainer/logprob"
	"needle/platform/cpu"
	"needle/platform/membw"
)

// KernelsOptions are the flags of `needle bench kernels`.
type KernelsOptions struct {
	JSON     bool          // one JSON object instead of a table
	Threads  int           // the "all threads" count; every case also runs with 1 thread
	MinTime  time.Duration // repeat a measurement at least this long (and 3 runs); the best counts
	MembwMiB int           // size of the buffer read to measure memory bandwidth
	Only     string        // run only the cases whose name contains this (membw always runs)
}

// Specs declares the options (`needle bench kernels`'s flags).
func (o *KernelsOptions) Specs() option.Specs {
	return option.Specs{
		option.Bool(&o.JSON, "JSON", "json", false, "print one JSON object (results per case and thread count) instead of a table"),
		option.Num(&o.Threads, "Threads", "threads", runtime.NumCPU(), option.Above(0), "the 'all threads' count; every case also runs with 1 thread"),
		option.Num(&o.MinTime, "MinTime", "min-time", time.Second, option.Above(0), "keep repeating a measurement for at least this long (at least 3 runs); the best run counts"),
		option.Num(&o.MembwMiB, "MembwMiB", "membw-mib", 512, option.Above(0), "size in MiB of the buffer read to measure memory bandwidth (keep it well above the L3 size)"),
		option.String(&o.Only, "Only", "only", "", "run only the kernel cases whose name contains this text (membw always runs)"),
	}
}

// kernelCase is one `needle bench kernels` measurement.
type kernelCase struct {
	name  string // what and which shape, e.g. "logprob bf16 N=1024 V=151936"
	bytes int64  // bytes one run must read at least (its bandwidth-bound floor)
	elems int64  // elements one run processes
	// prepare allocates the inputs once (it may be slow) and returns run, one complete run with
	// the given number of threads, and free, which drops the inputs.
	prepare func() (run func(threads int) error, free func(), err error)
}

// kernelCases are the cases Kernels runs, in this order: delta encode, delta apply (delta.go),
// logprob, then the fused linear logprob.
func kernelCases() []kernelCase {
	cases := deltaCases(deltaBenchBytes)
	for _, n := range logprobRows {
		cases = append(cases, logprobCase(n, logprobVocab))
	}
	return append(cases, linearCase(256, 1024, 32768))
}

// kernelResult is one case at one thread count (the --json record).
type kernelResult struct {
	Name         string  `json:"name"`
	Threads      int     `json:"threads"`
	Seconds      float64 `json:"seconds"`      // best run, wall time
	CPUSeconds   float64 `json:"cpu_seconds"`  // process CPU time (user + system) of that run
	GBps         float64 `json:"gb_per_s"`     // bytes / seconds / 1e9
	GElemsPerSec float64 `json:"gelems_per_s"` // elements / seconds / 1e9
	PerThread    float64 `json:"gelems_per_s_per_thread"`
	PerCPUSecond float64 `json:"gelems_per_cpu_s"`   // elements / CPU seconds: the per-core rate, robust to a busy machine
	BWFraction   float64 `json:"bandwidth_fraction"` // GBps / read bandwidth at this thread count
}

type kernelReport struct {
	SIMD       string             `json:"simd"`
	CUDA       string             `json:"cuda"`
	ReadGBps   map[string]float64 `json:"read_bandwidth_gb_per_s"` // by thread count
	MembwBytes int64              `json:"membw_buffer_bytes"`
	Results    []kernelResult     `json:"results"`
}

// logprobRows and logprobVocab are the bench shapes: Qwen2.5's vocabulary, bf16 logits.
var (
	logprobRows  = []int{1024, 2048}
	logprobVocab = 151936
)

func logprobCase(n, v int) kernelCase {
	return kernelCase{
		name:  fmt.Sprintf("logprob bf16 N=%d V=%d", n, v),
		bytes: int64(n)*int64(v)*2 + int64(n)*8,
		elems: int64(n) * int64(v),
		prepare: func() (func(int) error, func(), error) {
			x := logprob.Logits{DType: logprob.BF16, Rows: n, Vocab: v, Data: randomBF16(make([]byte, 2*n*v), 3)}
			labels, out := logprobLabels(n, v)
			run := func(threads int) error {
				opt := logprob.DefaultOptions()
				opt.Threads = threads
				return logprob.Compute(x, labels, opt, out)
			}
			return run, func() { x.Data = nil }, nil
		},
	}
}

// logprobLabels are the labels of n rows over a vocabulary of v (spread over it) and their
// result buffers.
func logprobLabels(n, v int) ([]int64, logprob.Output) {
	labels := make([]int64, n)
	for i := range labels {
		labels[i] = int64(i*7919) % int64(v)
	}
	return labels, logprob.Output{Logprob: make([]float32, n), Entropy: make([]float32, n), LSE: make([]float32, n)}
}

// linearCase is the fused op of libneedle.so's needle_linear_logprob_f32 (logprob.LinearCompute):
// the rows' log-probs from hidden [n, h] and lm_head [v, h] without holding the logits. It is
// bound by its 2 x n x v x h flops; its bytes are what it must read at least (lm_head, hidden).
func linearCase(n, h, v int) kernelCase {
	return kernelCase{
		name:  fmt.Sprintf("linear logprob fp32 N=%d h=%d V=%d", n, h, v),
		bytes: int64(v)*int64(h)*4 + int64(n)*int64(h)*4 + int64(n)*8,
		elems: int64(n) * int64(v),
		prepare: func() (func(int) error, func(), error) {
			s := uint64(0x2545f4914f6cdd1d)
			random := func(k int, scale float32) []float32 {
				x := make([]float32, k)
				for i := range x {
					x[i] = scale * (float32(xorshift(&s)>>40)/float32(1<<24)*2 - 1)
				}
				return x
			}
			hidden, lmHead := random(n*h, 1), random(v*h, 0.05)
			labels, out := logprobLabels(n, v)
			run := func(threads int) error {
				opt := logprob.DefaultOptions()
				opt.Threads = threads
				return logprob.LinearCompute(hidden, n, h, lmHead, v, labels, opt, out)
			}
			return run, func() { hidden, lmHead = nil, nil }, nil
		},
	}
}

// randomBF16 fills b with len(b)/2 bf16 values ~ scale * uniform(-1, 1), from a fixed xorshift
// stream, and returns it.
func randomBF16(b []byte, scale float32) []byte {
	s := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < len(b)/2; i++ {
		f := scale * (float32(xorshift(&s)>>40)/float32(1<<24)*2 - 1)
		bits := math.Float32bits(f)
		b[2*i], b[2*i+1] = byte(bits>>16), byte(bits>>24)
	}
	return b
}

// xorshift advances the xorshift64 state s and returns it.
func xorshift(s *uint64) uint64 {
	*s ^= *s << 13
	*s ^= *s >> 7
	*s ^= *s << 17
	return *s
}

// Kernels measures the memory read bandwidth, then every kernel case with 1 and opt.Threads
// threads, and writes the report to w.
func Kernels(w io.Writer, opt KernelsOptions) error {
	return runKernels(w, opt, kernelCases())
}

func runKernels(w io.Writer, opt KernelsOptions, cases []kernelCase) error {
	if err := opt.Specs().Check(); err != nil {
		return err
	}
	level, err := cpu.Selected()
	if err != nil {
		return err
	}
	rep := kernelReport{SIMD: level.String(), ReadGBps: map[string]float64{}}
	if dev, err := cuda.Open(0); err != nil {
		rep.CUDA = err.Error() + "; CPU kernels only"
	} else {
		rep.CUDA = "device " + dev.Name() + " present; this bench measures the CPU kernels only"
		dev.Close()
	}
	counts := []int{1}
	if opt.Threads > 1 {
		counts = append(counts, opt.Threads)
	}
	buf, err := membw.NewBuffer(opt.MembwMiB << 20)
	if err != nil {
		return err
	}
	rep.MembwBytes = buf.Bytes()
	bw := map[int]float64{}
	for _, t := range counts {
		bw[t] = buf.Bandwidth(t, 5)
		rep.ReadGBps[strconv.Itoa(t)] = bw[t] / 1e9
	}
	buf = nil
	for _, c := range cases {
		if !strings.Contains(c.name, opt.Only) {
			continue
		}
		run, free, err := c.prepare()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		for _, t := range counts {
			best, cpuTime, err := bestRun(run, t, opt.MinTime)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			s := best.Seconds()
			rep.Results = append(rep.Results, kernelResult{
				Name: c.name, Threads: t, Seconds: s, CPUSeconds: cpuTime.Seconds(),
				PerCPUSecond: float64(c.elems) / cpuTime.Seconds() / 1e9,
				GBps:         float64(c.bytes) / s / 1e9, GElemsPerSec: float64(c.elems) / s / 1e9,
				PerThread: float64(c.elems) / s / 1e9 / float64(t), BWFraction: float64(c.bytes) / s / bw[t],
			})
		}
		free()
	}
	if opt.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printKernelReport(w, rep, counts)
	return nil
}

// bestRun runs once to warm up, then repeats until minTime has passed and 3 runs are done. It
// returns the best wall time and the process CPU time of that same run.
func bestRun(run func(int) error, threads int, minTime time.Duration) (wall, cpu time.Duration, err error) {
	if err := run(threads); err != nil {
		return 0, 0, err
	}
	wall, total := time.Duration(1<<63-1), time.Duration(0)
	for n := 0; n < 3 || total < minTime; n++ {
		start, cpuStart := time.Now(), procstat.CPU()
		if err := run(threads); err != nil {
			return 0, 0, err
		}
		d, c := time.Since(start), procstat.CPU()-cpuStart
		total += d
		if d < wall {
			wall, cpu = d, c
		}
	}
	return wall, cpu, nil
}

func printKernelReport(w io.Writer, rep kernelReport, counts []int) {
	fmt.Fprintf(w, "SIMD level: %s\nCUDA: %s\n", rep.SIMD, rep.CUDA)
	for _, t := range counts {
		fmt.Fprintf(w, "memory read bandwidth, %d thread(s): %.1f GB/s (%d MiB buffer)\n", t, rep.ReadGBps[strconv.Itoa(t)], rep.MembwBytes>>20)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kernel\tthreads\tbest ms\tGB/s\tG elem/s\tG elem/s/thread\tG elem/CPU-s\tof bandwidth\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.3f\t%.3f\t%.3f\t%.0f%%\t\n", r.Name, r.Threads, r.Seconds*1e3, r.GBps, r.GElemsPerSec, r.PerThread, r.PerCPUSecond, 100*r.BWFraction)
	}
	tw.Flush()
}
