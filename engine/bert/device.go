package bert

import (
	"errors"
	"fmt"
	"io"

	"needle/cuda"
)

// The GPU modes of LoadOn, as `--gpu` spells them (engine.GPUAuto and engine.GPURequire).
const (
	GPUAuto    = "auto"
	GPURequire = "require"
)

// LoadOn is Load on GPU number ordinal when gpu is GPUAuto or GPURequire ("" is Load). With
// GPUAuto and no usable GPU (no driver or device, no cuBLAS, a shape the kernels do not take,
// the PTX not built), one line to log says why and the encoder runs on the CPU; with
// GPURequire that is an error. The encoder owns the device: Close releases it.
func LoadOn(dir string, opt Options, gpu string, ordinal int, log io.Writer) (*Encoder, error) {
	if gpu == "" {
		return Load(dir, opt)
	}
	if gpu != GPUAuto && gpu != GPURequire {
		return nil, fmt.Errorf("--gpu takes %s, %s or off, not %q", GPUAuto, GPURequire, gpu)
	}
	dev, err := cuda.Open(ordinal)
	if err == nil {
		gopt := opt
		gopt.Device = dev
		var e *Encoder
		if e, err = Load(dir, gopt); err == nil {
			e.ownDevice = true
			fmt.Fprintf(log, "needle: encoder on GPU %d (%s)\n", ordinal, dev.Name())
			return e, nil
		}
		err = errors.Join(err, dev.Close())
	}
	if gpu == GPURequire {
		return nil, fmt.Errorf("--gpu=require: %w", err)
	}
	fmt.Fprintf(log, "needle: not using a GPU, encoding on the CPU: %v\n", err)
	return Load(dir, opt)
}
