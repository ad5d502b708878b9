//go:build noplot

package plot

// The noplot build (the GPU check's needle, `make gpucheck`) leaves gonum/plot and its ~5 MB
// of embedded fonts out, to fit the device tool's 64 MiB: --plot is refused before a run.
const drawn = false

// Write refuses: see errNotBuilt.
func Write(path string, f Figure) error { return errNotBuilt }
