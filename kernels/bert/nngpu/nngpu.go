// Package nngpu is the GPU half of package nn: the kernels of nngpu.cu (embeddings and
// residual LayerNorms, bias+GELU, packed variable-length attention, pooling, fp16 conversion)
// loaded on a CUDA device, with typed launchers. The GEMMs between them are cuBLAS's (package
// cuda); encoder/bert strings both into the GPU forward pass.
//
// nngpu.cu is tested on the CPU under testkit/cudaemu (ctest nngpu_cuda_emu) against
// nn's scalar reference; on a GPU by encoder/bert's GPU parity test.
package nngpu

// #include "nngpu_launch.h"
import "C"

import (
	"embed"
	"fmt"

	"needle/cuda"
)

// ptxFiles is the ptx/ folder, where `make native` writes nngpu.cu compiled by clang-16 to
// sm_80 PTX and by nvcc to a fatbin (kernels/CMakeLists.txt) before go build embeds it.
//
//go:embed ptx
var ptxFiles embed.FS

const kernelStem = "nngpu" // the images of nngpu.cu in ptx/ (cuda.LoadKernels)

// Launch shapes of nngpu.cu (nngpu_launch.h).
const (
	block      = C.NG_BLOCK
	MaxHidden  = C.NG_MAX_HIDDEN // the widest row of the LayerNorm and pooling kernels
	attQueries = C.NG_ATT_QUERIES
	fillBlocks = 1024 // blocks of the grid-stride kernels (enough for any GPU, few for short rows)
)

// Entries are the kernels of nngpu.cu.
var Entries = []string{"ng_embed_layernorm", "ng_add_layernorm", "ng_bias_gelu", "ng_attention_hd32",
	"ng_attention_hd64", "ng_pool", "ng_to_half_rows"}

// Kernels are nngpu.cu's kernels loaded on one device. Launches are queued on the default stream
// without waiting (cuda.Function.Enqueue), after the cuBLAS calls queued before them; a failure
// surfaces at the next call that waits (the forward pass's download).
type Kernels struct {
	mod *cuda.Module
	fn  map[string]*cuda.Function
}

// Load loads the embedded kernels on dev (the fatbin, else the PTX).
func Load(dev *cuda.Device) (*Kernels, error) {
	k := &Kernels{fn: map[string]*cuda.Function{}}
	var err error
	k.mod, err = dev.LoadKernels(ptxFiles, kernelStem, func(mod *cuda.Module) (err error) {
		for _, name := range Entries {
			if k.fn[name], err = mod.Function(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Close unloads the module.
func (k *Kernels) Close() error { return k.mod.Unload() }

// HeadDimSupported reports whether Attention runs heads of width headDim.
func HeadDimSupported(headDim int) bool { return headDim == 32 || headDim == 64 }

func rows(n int) cuda.Dim3 { return cuda.Dim3{X: uint32(n), Y: 1, Z: 1} }

var threads = cuda.Dim3{X: block, Y: 1, Z: 1}

func checkWidth(op string, n int) error {
	if n < 1 || n > MaxHidden {
		return fmt.Errorf("nngpu %s: row width %d outside [1, %d]", op, n, MaxHidden)
	}
	return nil
}

// EmbedLayerNorm: x[t] = LayerNorm(word[ids[t]] + type0 + pos[posIDs[t]]) for tokens rows of
// width n (fp32 x, its fp16 copy xh).
func (k *Kernels) EmbedLayerNorm(x, xh, ids, posIDs, word, pos, type0, gamma, beta *cuda.Buffer, tokens, n int, eps float32) error {
	if err := checkWidth("embed layernorm", n); err != nil || tokens == 0 {
		return err
	}
	return k.fn["ng_embed_layernorm"].Enqueue(rows(tokens), threads, x, xh, ids, posIDs, word, pos, type0, gamma, beta, int32(n), eps)
}

// AddLayerNorm: x[t] = LayerNorm(y[t] + bias + x[t]) (fp32 x, its fp16 copy xh).
func (k *Kernels) AddLayerNorm(x, xh, y, bias, gamma, beta *cuda.Buffer, tokens, n int, eps float32) error {
	if err := checkWidth("add layernorm", n); err != nil || tokens == 0 {
		return err
	}
	return k.fn["ng_add_layernorm"].Enqueue(rows(tokens), threads, x, xh, y, bias, gamma, beta, int32(n), eps)
}

// BiasGELU: out = fp16(GELU(y + bias)) over tokens x n.
func (k *Kernels) BiasGELU(out, y, bias *cuda.Buffer, tokens, n int) error {
	if tokens*n == 0 {
		return nil
	}
	return k.fn["ng_bias_gelu"].Enqueue(rows(min(fillBlocks, (tokens*n+block-1)/block)), threads, out, y, bias, int64(tokens), int32(n))
}

// Attention: ctx (fp16 [T, heads*headDim]) = self-attention of the packed sequences start
// (nseq+1 offsets on the device; maxLen the longest) over qkv (fp32 [T, 3*hidden], without
// its bias qkvBias).
func (k *Kernels) Attention(ctx, qkv, qkvBias, start *cuda.Buffer, nseq, maxLen, heads, headDim int) error {
	if !HeadDimSupported(headDim) {
		return fmt.Errorf("nngpu attention: head dim %d (the GPU kernels take 32 and 64)", headDim)
	}
	if nseq == 0 || maxLen == 0 {
		return nil
	}
	grid := cuda.Dim3{X: uint32(nseq), Y: uint32(heads), Z: uint32((maxLen + attQueries - 1) / attQueries)}
	return k.fn[fmt.Sprintf("ng_attention_hd%d", headDim)].Enqueue(grid, cuda.Dim3{X: attQueries, Y: 1, Z: 1}, ctx, qkv, qkvBias, start, int32(heads))
}

// Pool: out[s] = mean (cls: first row) of x's rows of sequence s, L2-normalized if normalize.
func (k *Kernels) Pool(out, x, start *cuda.Buffer, nseq, n int, cls, normalize bool) error {
	if nseq == 0 {
		return nil
	}
	return k.fn["ng_pool"].Enqueue(rows(nseq), threads, out, x, start, int32(n), boolArg(cls), boolArg(normalize))
}

// ToHalf: out[i] = fp16(in[i]) for n values.
func (k *Kernels) ToHalf(out, in *cuda.Buffer, n int) error {
	if n == 0 {
		return nil
	}
	return k.fn["ng_to_half_rows"].Enqueue(rows(min(fillBlocks, (n+block-1)/block)), threads, out, in, int64(n))
}

func boolArg(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
