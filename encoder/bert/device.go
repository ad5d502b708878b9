package bert

import (
	"errors"
	"fmt"
	"io"

	"needle/cuda"
	"needle/internal/option"
	"needle/internal/writer"
)

// The GPU modes of LoadOn, as `--gpu` spells them (engine.GPUAuto and engine.GPURequire are
// these, for the index too).
const (
	GPUAuto    = "auto"
	GPURequire = "require"
)

// GPUFlag is a GPU mode (GPUAuto, GPURequire or "" for the CPU) as a flag takes it: --gpu alone
// is GPUAuto, --gpu=require GPURequire, --gpu=off the CPU. Options tables (engine's, bench's)
// declare their GPU field with it.
type GPUFlag struct{ Mode *string }

func (g GPUFlag) IsBoolFlag() bool { return true }

func (g GPUFlag) String() string {
	if g.Mode == nil {
		return ""
	}
	return *g.Mode
}

func (g GPUFlag) Set(s string) error {
	switch s {
	case "true", GPUAuto:
		*g.Mode = GPUAuto
	case GPURequire:
		*g.Mode = GPURequire
	case "false", "off":
		*g.Mode = ""
	default:
		return fmt.Errorf("takes auto, require or off, not %q", s)
	}
	return nil
}

// LoadOn is Load on GPU number ordinal when gpu is GPUAuto or GPURequire ("" is Load). With
// GPUAuto and no usable GPU (no driver or device, no cuBLAS, a shape the kernels do not take,
// the PTX not built), one line to log says why and the encoder runs on the CPU; with
// GPURequire that is an error (nil log: discarded). The encoder owns the device: Close releases it.
func LoadOn(dir string, opt Options, gpu string, ordinal int, log io.Writer) (*Encoder, error) {
	return On(gpu, ordinal, log, opt, func(o Options) (*Encoder, error) { return Load(dir, o) })
}

// On is LoadOn for any constructor of encoders (Load, NewRandom): build runs with
// opt.Device set to the GPU, or with opt as given on the CPU.
func On(gpu string, ordinal int, log io.Writer, opt Options, build func(Options) (*Encoder, error)) (*Encoder, error) {
	if gpu == "" {
		return build(opt)
	}
	log = writer.OrDiscard(log)
	if gpu != GPUAuto && gpu != GPURequire {
		return nil, option.Errorf("GPU", "%q, want \"\" (the CPU), %q or %q", gpu, GPUAuto, GPURequire)
	}
	dev, err := cuda.Open(ordinal)
	if err == nil {
		gopt := opt
		gopt.Device = dev
		var e *Encoder
		if e, err = build(gopt); err == nil {
			e.ownDevice = true
			fmt.Fprintf(log, "needle: encoder on GPU %d (%s)\n", ordinal, dev.Name())
			return e, nil
		}
		err = errors.Join(err, dev.Close())
	}
	if gpu == GPURequire {
		return nil, fmt.Errorf("GPU required: %w", err)
	}
	fmt.Fprintf(log, "needle: not using a GPU, encoding on the CPU: %v\n", err)
	return build(opt)
}

// GemmPeak measures the fp16 GEMM rate of a GPU encoder's device in TFLOP/s (cuda.BLAS.GemmPeak);
// 0 for a CPU encoder.
func (e *Encoder) GemmPeak() (float64, error) {
	if e.gpu == nil {
		return 0, nil
	}
	return e.gpu.blas.GemmPeak()
}

// Peak measures for about the given time the multiply rate (ops/s, 2 per multiply-add) a CPU
// encoder's Linears cannot exceed on threads threads: the instruction of its precision at its
// SIMD level (nn.Ops.Peak); 0 at the reference level.
func (e *Encoder) Peak(threads int, seconds float64) float64 {
	return e.ops.Peak(e.opt.Precision.format(), threads, seconds)
}

// FLOPs is the model's arithmetic for one forward pass over sequences of the given token
// counts: the Linears (2 x tokens x (4H^2 + 2HI) per layer) and attention's two products
// (4 x L^2 x H per sequence and layer); embeddings, LayerNorms and pooling are not counted.
func (e *Encoder) FLOPs(lengths []int) float64 {
	H, I := float64(e.cfg.Hidden), float64(e.cfg.Intermediate)
	var tokens, squares float64
	for _, l := range lengths {
		tokens += float64(l)
		squares += float64(l) * float64(l)
	}
	return float64(e.cfg.Layers) * (2*tokens*(4*H*H+2*H*I) + 4*squares*H)
}
