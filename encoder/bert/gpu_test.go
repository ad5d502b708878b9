package bert

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"needle/encoder/wordpiece"
	"needle/internal/option"
	"needle/testkit/cudatest"
	"needle/testkit/testenv"
)

// The GPU encoder's tests: each needs a CUDA device and cuBLAS and skips without them (saying
// why), or fails under NEEDLE_REQUIRE_GPU=1 (the GPU check).

func loadGPU(t *testing.T, opt Options) *Encoder {
	t.Helper()
	opt.Device = cudatest.DeviceWithBLAS(t)
	e, err := Load(testenv.MiniLMDir(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// minCosine is the smallest cosine of the rows of a and b (dim H each).
func minCosine(a, b []float32, H int) (float64, int) {
	worst, at := 2.0, -1
	for i := 0; i < len(a)/H; i++ {
		x, y := a[i*H:(i+1)*H], b[i*H:(i+1)*H]
		if c := dot(x, y) / (math.Sqrt(dot(x, x)*dot(y, y)) + 1e-30); c < worst {
			worst, at = c, i
		}
	}
	return worst, at
}

// TestGPUGolden holds the GPU encoder to sentence-transformers' fp32 embeddings of the golden
// texts (empty, short, over-long: truncated as HF does) as the CPU encoder is held, and to the
// CPU encoder itself: every cosine >= 0.9999 (the GPU encoder's parity goal).
func TestGPUGolden(t *testing.T) {
	g := loadGPU(t, Options{})
	checkGolden(t, g, 0.9999, 0.99995)
	texts := testenv.ReadJSONL[string](t, "testdata/golden_texts.jsonl")
	want, err := loadMiniLM(t).Encode(texts, "query: ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.Encode(texts, "query: ")
	if err != nil {
		t.Fatal(err)
	}
	if c, at := minCosine(got, want, g.Dim()); c < 0.9999 {
		t.Errorf("text %d %q: GPU vs CPU cosine %.8f < 0.9999", at, texts[at], c)
	} else {
		t.Logf("GPU vs CPU: min cosine %.8f over %d texts", c, len(texts))
	}
}

// TestGPUWordNetTop10: the GPU encoder's top-10 of 100 WordNet queries over 2,000 glosses are
// the CPU encoder's.
func TestGPUWordNetTop10(t *testing.T) {
	queries, got, _, _ := wordNetTop10(t, loadGPU(t, Options{}))
	_, want, _, _ := wordNetTop10(t, loadMiniLM(t))
	for i := range queries {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("query %q: GPU top-10 %v, CPU %v", queries[i], got[i], want[i])
		}
	}
}

// TestGPUSplit: batches over a tiny activation budget are split (down to one text) and give
// the same embeddings as one batch.
func TestGPUSplit(t *testing.T) {
	texts := testenv.ReadJSONL[string](t, "testdata/golden_texts.jsonl")[:40]
	whole, err := loadGPU(t, Options{}).Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	g := loadGPU(t, Options{})
	g.gpu.budget = uint64(slices.Max(activationSizes(g.cfg, 300, 1))) * 3
	split, err := g.Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	if c, at := minCosine(split, whole, g.Dim()); c < 0.99999 {
		t.Errorf("text %d: split batches vs one batch cosine %.8f", at, c)
	}
}

// TestGPURandomE5 runs the e5-base shape (head dim 64, 12 layers) with random weights on the
// GPU and the CPU: cosine >= 0.9999 on texts of every length up to 512 tokens.
func TestGPURandomE5(t *testing.T) {
	texts := []string{"", "a", "what is the capital of france", strings.Repeat("long passage words ", 200)}
	randomParity(t, E5Base, append(texts, testenv.ReadJSONL[string](t, "testdata/golden_texts.jsonl")[:60]...))
}

// TestGPURandomSmall runs a one-layer encoder of head dim 32 with random weights on the GPU and
// the CPU (cosine >= 0.9999): every kernel, GEMM and packing step of the forward pass at a size
// the emulated driver runs in seconds (TestWithoutGPUEmulatedDriver).
func TestGPURandomSmall(t *testing.T) {
	cfg := Config{Layers: 1, Hidden: 64, Heads: 2, Intermediate: 128, MaxPositions: 512, VocabSize: 30522, TypeVocabSize: 2, Eps: 1e-12}
	randomParity(t, cfg, []string{"", "a", "what is the capital of france", "long passage words long passage words long passage"})
}

// randomParity encodes texts with random weights of shape cfg on the GPU and on the CPU and
// wants every cosine >= 0.9999.
func randomParity(t *testing.T, cfg Config, texts []string) {
	dev := cudatest.DeviceWithBLAS(t)
	tok, err := wordpiece.Load(testenv.MiniLMDir(t))
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{MaxLength: 512}
	cpuEnc, err := NewRandom(cfg, 3, tok, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.Device = dev
	gpuEnc, err := NewRandom(cfg, 3, tok, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer gpuEnc.Close()
	want, err := cpuEnc.Encode(texts, "passage: ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := gpuEnc.Encode(texts, "passage: ")
	if err != nil {
		t.Fatal(err)
	}
	if c, at := minCosine(got, want, cfg.Hidden); c < 0.9999 {
		t.Errorf("text %d: GPU vs CPU cosine %.8f < 0.9999", at, c)
	} else {
		t.Logf("GPU vs CPU: min cosine %.8f over %d texts", c, len(texts))
	}
}

// TestWithoutGPUEmulatedDriver runs TestGPURandomSmall through package cuda against the emulated
// driver and cuBLAS (libcudaemu_driver.so: nngpu.cu under cudaemu, GemmEx as cuBLAS defines it):
// gpu.go's weight upload and fp16 conversion, GEMM operand layouts and transposes, the kernels'
// arguments and the packed batch, on the CPU; not the GPU.
func TestWithoutGPUEmulatedDriver(t *testing.T) {
	cudatest.RunEmulated(t, "TestGPURandomSmall")
}

// TestGPUInt8Refused: int8 is a CPU precision.
func TestGPUInt8Refused(t *testing.T) {
	_, err := Load(testenv.MiniLMDir(t), Options{Device: cudatest.Device(t), Precision: Int8})
	if err == nil || !strings.Contains(err.Error(), "int8") {
		t.Fatalf("Load(int8 on a GPU) = %v, want a refusal", err)
	}
}

// TestLoadOnWithoutGPUFallsBack: without a GPU, LoadOn in auto mode says why in one line and returns the
// CPU encoder; require fails with the reason; another mode is refused.
func TestLoadOnWithoutGPUFallsBack(t *testing.T) {
	cudatest.WithoutDevice(t)
	dir := testenv.MiniLMDir(t)
	var log strings.Builder
	e, err := LoadOn(dir, Options{}, GPUAuto, 0, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Device() != nil || log.String() == "" || strings.Count(log.String(), "\n") != 1 ||
		!strings.HasPrefix(log.String(), "needle: not using a GPU, encoding on the CPU: ") || !strings.Contains(log.String(), "no CUDA device") {
		t.Errorf("auto without a GPU: device %v, log %q", e.Device(), log.String())
	}
	texts := []string{"", "hello world"}
	got, err1 := e.Encode(texts, "")
	want, err2 := loadMiniLM(t).Encode(texts, "")
	if err1 != nil || err2 != nil || !slices.Equal(got, want) {
		t.Errorf("the fallback encoder differs from Load's: %v %v", err1, err2)
	}
	if _, err := LoadOn(dir, Options{}, GPURequire, 0, &log); err == nil || !strings.HasPrefix(err.Error(), "GPU required: ") || !strings.Contains(err.Error(), "no CUDA device") {
		t.Errorf("require without a GPU: %v", err)
	}
	var oe *option.Error
	if _, err := LoadOn(dir, Options{}, "maybe", 0, &log); !errors.As(err, &oe) || oe.Field != "GPU" || !strings.Contains(err.Error(), `"maybe"`) {
		t.Errorf("mode maybe: %v", err)
	}
}

// TestFLOPs: e5-base over one 128-token text is 12 layers of 2*128*(4*768^2 + 2*768*3072)
// Linear FLOPs plus 4*128^2*768 of attention.
func TestFLOPs(t *testing.T) {
	tok, err := wordpiece.Load(testenv.MiniLMDir(t))
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewRandom(Config{Layers: 12, Hidden: 768, Heads: 12, Intermediate: 3072, MaxPositions: 512, VocabSize: 30522, TypeVocabSize: 2, Eps: 1e-12}, 1, tok, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := 12 * (2*128*(4*768*768+2*768*3072) + 4*128*128*768.0)
	if got := e.FLOPs([]int{128}); got != want {
		t.Errorf("FLOPs = %g, want %g", got, want)
	}
	if got := e.FLOPs([]int{64, 64}); got >= want {
		t.Errorf("two texts of 64 tokens: %g FLOPs, want fewer than one of 128 (attention is quadratic)", got)
	}
}
