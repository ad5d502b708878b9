package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"needle/internal/mapfile"
	"needle/internal/option"
	"needle/internal/prom"
	"needle/platform/membw"
	"needle/safetensors/synth"
	"needle/weights"
	"needle/weights/feed"
	"needle/weights/receiver"
	"needle/weights/sender"
	"needle/weights/store"
	"needle/weights/wire"
)

// WeightsOptions configures `needle bench weights`.
type WeightsOptions struct {
	Shape     string      // a key of WeightShapes
	Changed   float64     // fraction of elements a step changes (the optimizer's rate is calibrated to it)
	Receivers int         // receivers on loopback
	Tree      bool        // the first receiver re-serves and the others pull from it
	Dir       string      // folder of the halves and the receivers' files (a tmpfs: /dev/shm)
	Threads   int         // goroutines of encode and apply
	Format    wire.Format // of delta records
	Python    string      // interpreter of the AstraFlow NumPy baseline; "" skips it
	Script    string      // bench/weights_astraflow.py
	AstraFlow string      // a checkout of AstraFlow: the script's encode and apply run its own code ("" the NumPy restatement)
	MembwMiB  int
	Log       *log.Logger // the nodes' logs; nil: discarded
	// Needle is the needle binary that runs each receiver as its own process (`needle weights
	// recv`), as on a rollout host: their files' pages then count in their memory, not the
	// benchmark's. Empty: receivers run in this process (tests).
	Needle string
}

// Specs declares the options (`needle bench weights`'s flags).
func (o *WeightsOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Shape, "Shape", "shape", "qwen2.5-1.5b", "model shape (bf16): qwen2.5-0.5b, qwen2.5-1.5b, tiny"),
		option.Num(&o.Changed, "Changed", "changed", 0.01, option.Above(0), "fraction of elements the step changes"),
		option.Num(&o.Receivers, "Receivers", "receivers", 2, option.Above(0), "receivers on loopback"),
		option.Bool(&o.Tree, "Tree", "tree", false, "the first receiver re-serves, the others pull from it"),
		option.String(&o.Dir, "Dir", "dir", "/dev/shm", "folder of the halves and the receivers' files"),
		option.Num(&o.Threads, "Threads", "threads", runtime.NumCPU(), option.Above(0), "goroutines of encode and apply"),
		option.Var(&o.Format, "Format", "format", "packed", "delta records: packed (\"compact\" is its old name) or astraflow"),
		option.String(&o.Python, "Python", "python", "", "Python with NumPy for the AstraFlow baseline (empty: skip it)"),
		option.String(&o.Script, "Script", "script", "bench/weights_astraflow.py", "the baseline script"),
		option.String(&o.AstraFlow, "AstraFlow", "astraflow", "", "a checkout of AstraFlow (by hand, never committed): the baseline's encode and apply run AstraFlow's own code (TransferAgent._compute_delta; RaaSWeightReceiver.apply_delta_and_save and apply_delta_worker.apply_delta) instead of the NumPy restatement (--python needs torch, pyzmq and requests)"),
		option.Num(&o.MembwMiB, "MembwMiB", "membw-mib", 512, option.Above(0), "buffer of the read-bandwidth measurement"),
		option.String(&o.Needle, "Needle", "needle", "", "needle binary that runs each receiver as its own process (default: this needle; empty: receivers in this process)"),
	}
}

// qwen returns the tensors of a Qwen2.5 decoder (tied embeddings) in bf16.
func qwen(hidden, inter, layers, kvDim, vocab int64) []synth.Tensor {
	ts := []synth.Tensor{synth.T("model.embed_tokens.weight", "BF16", vocab, hidden)}
	for i := range layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, t := range []synth.Tensor{
			synth.T("self_attn.q_proj.weight", "BF16", hidden, hidden), synth.T("self_attn.q_proj.bias", "BF16", hidden),
			synth.T("self_attn.k_proj.weight", "BF16", kvDim, hidden), synth.T("self_attn.k_proj.bias", "BF16", kvDim),
			synth.T("self_attn.v_proj.weight", "BF16", kvDim, hidden), synth.T("self_attn.v_proj.bias", "BF16", kvDim),
			synth.T("self_attn.o_proj.weight", "BF16", hidden, hidden),
			synth.T("mlp.gate_proj.weight", "BF16", inter, hidden), synth.T("mlp.up_proj.weight", "BF16", inter, hidden),
			synth.T("mlp.down_proj.weight", "BF16", hidden, inter),
			synth.T("input_layernorm.weight", "BF16", hidden), synth.T("post_attention_layernorm.weight", "BF16", hidden),
		} {
			t.Name = p + t.Name
			ts = append(ts, t)
		}
	}
	return append(ts, synth.T("model.norm.weight", "BF16", hidden))
}

// WeightShapes are the model shapes the benchmark publishes (Qwen2.5's configs).
var WeightShapes = map[string][]synth.Tensor{
	"qwen2.5-0.5b": qwen(896, 4864, 24, 128, 151936),
	"qwen2.5-1.5b": qwen(1536, 8960, 28, 256, 151936),
	"tiny":         qwen(64, 128, 2, 32, 1000), // tests
}

// weightsReport is the benchmark's JSON.
type weightsReport struct {
	Shape        string  `json:"shape"`
	Bytes        int64   `json:"bytes"`
	ChangedFrac  float64 `json:"changed_fraction"`   // measured: changed / compared elements
	HighByteFrac float64 `json:"high_byte_fraction"` // of the changed elements, those whose high byte changed (a 2^22-element sample)
	LR           float32 `json:"lr"`                 // the optimizer step's rate (synth.Optimizer)
	PeakRSS      int64   `json:"peak_rss_bytes"`     // of this process, file mappings of /dev/shm included
	Threads      int     `json:"threads"`
	ReadGBps     float64 `json:"read_gbps"` // memory read bandwidth, Threads goroutines
	FillSeconds  float64 `json:"fill_seconds"`
	// FullReadySeconds is per receiver, from the first version's commit: every receiver
	// takes it in full, as a receiver joining late or resyncing does.
	FullReadySeconds []float64 `json:"full_ready_seconds"`
	ReadySeconds     []float64 `json:"ready_seconds"` // per receiver, from the delta version's commit
	// PublishCopySeconds is a publisher's copy of a whole version (a receiver's file, resident)
	// into the sender's other half, never written before: Begin and the copy, plus the Commit.
	// What a trainer waits for; timed once the receivers have made their spare copies (a
	// trainer's host does not share its cores with them).
	PublishCopySeconds float64 `json:"publish_copy_seconds"`
	// PublishOverwriteSeconds is the same copy (Begin and the copy, no Commit) into the half
	// that held version 1: from a trainer's third version on, every publish overwrites a
	// half's pages instead of filling fresh ones.
	PublishOverwriteSeconds float64      `json:"publish_overwrite_seconds"`
	UplinkCopies            float64      `json:"uplink_copies"` // delta bytes the sender sent / the step's bytes
	WireBytes               int64        `json:"wire_bytes"`
	AstraFlow               int64        `json:"astraflow_bytes"`
	EncodeSeconds           float64      `json:"encode_seconds"` // the sender's job: encode, frame, hash
	EncodeOfBW              float64      `json:"encode_of_read_bandwidth"`
	ApplySeconds            float64      `json:"apply_seconds"`
	NumPy                   *numpyResult `json:"numpy,omitempty"`
	EncodeSpeedup           float64      `json:"encode_speedup,omitempty"`
	ApplySpeedup            float64      `json:"apply_speedup,omitempty"`
	WireRatio               float64      `json:"wire_ratio"`
}

// numpyResult is what bench/weights_astraflow.py measured on the same buffers.
type numpyResult struct {
	Version       string  `json:"numpy"`
	Encode        string  `json:"encode"` // "astraflow" (its own _compute_delta) or "numpy" (the restatement)
	EncodeSeconds float64 `json:"encode_seconds"`
	// "astraflow" (RaaSWeightReceiver.apply_delta_and_save: the scatter into its in-RAM copy, then
	// the whole file written afresh) or "numpy" (the restatement's scatter into the mapped file)
	Apply        string  `json:"apply"`
	ApplySeconds float64 `json:"apply_seconds"`
	// AstraFlow's subprocess variant (apply_delta_worker.apply_delta: the scatter into the mapped
	// file), with "astraflow" only
	ApplyWorkerSeconds float64 `json:"apply_worker_seconds,omitempty"`
	Bytes              int64   `json:"bytes"`
	Changed            int64   `json:"changed"`
}

// Weights publishes two versions of a model to an in-process sender with receivers on
// loopback, times the second (publish to every receiver ready), then measures the sender's
// encode job and the receivers' apply against AstraFlow's NumPy algorithm on the same bytes.
func Weights(w io.Writer, o WeightsOptions) error {
	tensors, ok := WeightShapes[o.Shape]
	if !ok {
		return fmt.Errorf("unknown shape %q", o.Shape)
	}
	o.Threads = max(o.Threads, 1)
	rep := weightsReport{Shape: o.Shape, Threads: o.Threads}
	buf, err := membw.NewBuffer(o.MembwMiB << 20)
	if err != nil {
		return err
	}
	rep.ReadGBps = buf.Bandwidth(o.Threads, 5) / 1e9
	buf = nil
	debug.FreeOSMemory()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(o.Dir, "bench-weights-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s, err := sender.Open(sender.Options{Dir: filepath.Join(work, "send"), Format: o.Format, Keep: 2, Threads: o.Threads, Log: o.Log})
	if err != nil {
		return err
	}
	defer s.Close()
	reg := prom.NewRegistry()
	addr, stopServer, err := serveStore(s.Store, reg, o.Log)
	if err != nil {
		return err
	}
	defer stopServer()
	// Version 1: the model, written into its half; every receiver (already waiting) takes it in
	// full. Version 2 is the same fp32 master after one optimizer step, both rounded to bf16 as
	// a trainer publishes.
	opt := synth.Calibrated(1, o.Changed)
	rep.LR = opt.LR
	_, rep.HighByteFrac = opt.Changed(0, 1<<22)
	ready, stopReceivers, err := startReceivers(work, addr, o)
	if err != nil {
		return err
	}
	defer stopReceivers()
	slot1, err := writeVersion(s, 1, tensors, func(data []byte) { opt.Version(data, 0, o.Threads) })
	if err != nil {
		return err
	}
	rep.Bytes = slot1.Size
	if rep.FullReadySeconds, _, err = commitAndWait(s, slot1, ready, o.Receivers); err != nil {
		return err
	}
	// Version 2's half is written twice: first as a trainer's publish copies a whole version
	// (version 1 from a receiver's file, into this half's fresh memory: timed), then by the
	// optimizer step over all of it.
	if err := waitSpares(work, o.Receivers, 1); err != nil {
		return err
	}
	slot2, copied, err := beginAndCopy(s, tensors, filepath.Join(work, "r0", "model.safetensors"))
	if err != nil {
		return err
	}
	start := time.Now()
	if err := withMapping(slot2.Path, true, func(data []byte) error {
		opt.Version(data, 1, o.Threads)
		return nil
	}); err != nil {
		return err
	}
	rep.FillSeconds = time.Since(start).Seconds()
	var commit2 float64
	if rep.ReadySeconds, commit2, err = commitAndWait(s, slot2, ready, o.Receivers); err != nil {
		return err
	}
	rep.PublishCopySeconds = copied + commit2
	js, err := s.Wait(2)
	if err != nil {
		return err
	}
	rep.WireBytes, rep.AstraFlow = js.WireBytes, js.AstraFlowBytes
	rep.ChangedFrac = float64(js.Changed) / float64(js.Elements)
	rep.WireRatio = float64(js.WireBytes) / float64(js.AstraFlowBytes)
	rep.UplinkCopies = reg.Counter("needle_weights_sent_bytes_total", "", "kind", "delta").Get() / float64(js.WireBytes)
	stopReceivers() // their files go: the comparisons below need the memory
	s.Close()       // and so do the sender's mappings of the halves
	if err := compareKernels(&rep, slot1.Path, slot2.Path, work, o); err != nil {
		return err
	}
	if rep.PublishOverwriteSeconds, err = overwriteCopy(filepath.Join(work, "send"), tensors, slot2.Path); err != nil {
		return err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		rep.PeakRSS = ru.Maxrss << 10 // KiB on Linux
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func weightsTensors(ts []synth.Tensor) []sender.Tensor {
	out := make([]sender.Tensor, len(ts))
	for i, t := range ts {
		out[i] = sender.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	return out
}

// writeVersion begins version and fills its half with fill (the whole file, its header in
// place); the caller commits the slot.
func writeVersion(s *sender.Sender, version uint64, ts []synth.Tensor, fill func([]byte)) (*sender.Slot, error) {
	slot, err := s.Begin(version, weightsTensors(ts), map[string]string{"format": "pt"})
	if err != nil {
		return nil, err
	}
	if err := withMapping(slot.Path, true, func(data []byte) error { fill(data); return nil }); err != nil {
		s.Abort()
		return nil, err
	}
	return slot, nil
}

// commitAndWait commits slot and returns the seconds from the commit to each of receivers
// telling that they hold it, and the seconds the commit itself took.
func commitAndWait(s *sender.Sender, slot *sender.Slot, ready <-chan struct{}, receivers int) ([]float64, float64, error) {
	t0 := time.Now()
	if err := s.Commit(slot); err != nil {
		return nil, 0, err
	}
	commit := time.Since(t0).Seconds()
	secs := make([]float64, 0, receivers)
	for range receivers {
		<-ready
		secs = append(secs, time.Since(t0).Seconds())
	}
	return secs, commit, nil
}

// beginAndCopy begins the next version and copies the file at src (a whole version of the
// same tensors, resident) into its half, as a publisher does; it returns the slot and the
// seconds from Begin to the end of the copy.
func beginAndCopy(s *sender.Sender, ts []synth.Tensor, src string) (*sender.Slot, float64, error) {
	var slot *sender.Slot
	var secs float64
	err := withMapping(src, false, func(img []byte) error {
		t0 := time.Now()
		var err error
		if slot, err = s.Begin(0, weightsTensors(ts), map[string]string{"format": "pt"}); err != nil {
			return err
		}
		if err := sender.Write(slot, func(i int) []byte { return img[slot.Offsets[i][0]:slot.Offsets[i][1]] }); err != nil {
			s.Abort()
			return err
		}
		secs = time.Since(t0).Seconds()
		return nil
	})
	return slot, secs, err
}

// overwriteCopy times a publisher's copy of the version at src into half 0 of the sender's
// folder dir, which holds a version (a new run on the folder: half 0 is the half it writes
// first). The publish is then aborted.
func overwriteCopy(dir string, ts []synth.Tensor, src string) (float64, error) {
	s, err := sender.Open(sender.Options{Dir: dir, NewRun: true})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	_, secs, err := beginAndCopy(s, ts, src)
	s.Abort()
	return secs, err
}

// waitSpares waits until each of receivers (their folders under work) holds a spare copy of
// version, as its state file says.
func waitSpares(work string, receivers int, version uint64) error {
	for i := range receivers {
		state := filepath.Join(work, fmt.Sprintf("r%d", i), ".model.safetensors.needle", "state.json")
		for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			var st struct {
				Spare uint64 `json:"spare"`
			}
			if b, err := os.ReadFile(state); err == nil && json.Unmarshal(b, &st) == nil && st.Spare == version {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("receiver %d made no spare copy of version %d in 10 minutes (%s)", i, version, state)
			}
		}
	}
	return nil
}

// withMapping maps path whole (writable or not, pages populated) for the duration of f.
func withMapping(path string, write bool, f func([]byte) error) error {
	data, release, err := mapfile.Map(path, write, true)
	if err != nil {
		return err
	}
	defer release()
	return f(data)
}

// serveStore serves st on a loopback port.
func serveStore(st *store.Store, reg *prom.Registry, lg *log.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := feed.New(st, reg)
	srv.Log = lg
	go srv.Serve(ln)
	return ln.Addr().String(), srv.Close, nil
}

// startReceivers starts o.Receivers receivers whose files live under work: all pulling from
// addr, or with o.Tree the first re-serving and the others pulling from it. Each version a
// receiver publishes sends one value on ready. stop ends them and removes their files.
func startReceivers(work, addr string, o WeightsOptions) (ready chan struct{}, stop func(), err error) {
	if o.Needle != "" {
		return startReceiverProcesses(work, addr, o)
	}
	ready = make(chan struct{}, 16*o.Receivers)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var closers []func()
	stop = func() {
		cancel()
		wg.Wait()
		for _, c := range closers {
			c()
		}
		closers = nil
		for i := range o.Receivers {
			os.RemoveAll(filepath.Join(work, fmt.Sprintf("r%d", i)))
		}
	}
	up := addr
	for i := range o.Receivers {
		dir := filepath.Join(work, fmt.Sprintf("r%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			stop()
			return nil, nil, err
		}
		opt := receiver.Options{Upstreams: []string{up}, Out: filepath.Join(dir, "model.safetensors"), Threads: o.Threads,
			Log: o.Log, Ready: func(string, uint64) { ready <- struct{}{} }}
		if o.Tree && i == 0 {
			opt.Store = store.New(2, o.Threads)
			a, closeSrv, err := serveStore(opt.Store, prom.NewRegistry(), o.Log)
			if err != nil {
				stop()
				return nil, nil, err
			}
			closers = append(closers, closeSrv)
			up = a
		}
		r, err := receiver.Open(opt)
		if err != nil {
			stop()
			return nil, nil, err
		}
		closers = append(closers, r.Close)
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx) }()
	}
	return ready, stop, nil
}

// startReceiverProcesses is startReceivers with each receiver a `needle weights recv` process.
// A receiver tells the benchmark of each version through its notifier (a POST to a loopback
// listener here), as it tells an inference engine.
func startReceiverProcesses(work, addr string, o WeightsOptions) (ready chan struct{}, stop func(), err error) {
	ready = make(chan struct{}, 16*o.Receivers)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	notified := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ready <- struct{}{}
		io.WriteString(w, `{"success": true}`)
	})}
	go notified.Serve(ln)
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
		}
		cmds = nil
		notified.Close()
		for i := range o.Receivers {
			os.RemoveAll(filepath.Join(work, fmt.Sprintf("r%d", i)))
		}
	}
	logs := io.Discard
	if o.Log != nil {
		logs = o.Log.Writer()
	}
	up := addr
	for i := range o.Receivers {
		dir := filepath.Join(work, fmt.Sprintf("r%d", i))
		recv := option.Defaults[weights.RecvOptions]()
		recv.Receiver.Upstreams, recv.Receiver.Out = []string{up}, filepath.Join(dir, "model.safetensors")
		recv.Receiver.Node, recv.Receiver.Threads = fmt.Sprintf("r%d", i), o.Threads
		recv.NotifyURL = "http://" + ln.Addr().String() + "/ready"
		if o.Tree && i == 0 {
			if up, err = freePort(); err != nil {
				stop()
				return nil, nil, err
			}
			recv.Serve = up
		}
		// The command line of these options, from the table that declares `needle weights recv`'s flags.
		cmd := exec.Command(o.Needle, append([]string{"weights", "recv"}, recv.Specs().Args()...)...)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := os.MkdirAll(dir, 0o755); err != nil {
			stop()
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		cmds = append(cmds, cmd)
	}
	return ready, stop, nil
}

// freePort returns a loopback address that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
