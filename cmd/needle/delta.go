package main

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"time"

	"needle/platform/cpu"
	"needle/weights/deltafile"
	"needle/weights/wire"
)

// deltas are `needle delta encode` and `needle delta apply`.
var deltas = newGroup("needle delta", "subcommand", "A delta lists, per 1 MiB chunk of B's tensors, the elements whose bits changed since A (compared as\n"+
	"raw 2- or 4-byte words) and their new bits: the records `needle weights` sends. Apply rebuilds B byte for byte.\n\n", "encode", "apply")

func init() {
	register(command{name: "delta", summary: "diff two safetensors checkpoints into a delta file, or apply one", run: deltas.run})
	deltas.add(command{name: "encode", summary: "--old A.safetensors --new B.safetensors --out D: the elements whose bits changed", run: runDeltaEncode})
	deltas.add(command{name: "apply", summary: "--base A.safetensors --delta D --out B2.safetensors: B rebuilt byte for byte", run: runDeltaApply})
}

// deltaThreads is the --threads flag shared by both subcommands.
func deltaThreads(fs *flagSet) *int {
	return fs.Int("threads", runtime.NumCPU(), "threads that encode or apply the chunks")
}

// parseRequired parses args and checks that every named string flag is set.
func parseRequired(fs *flagSet, args []string, required map[string]*string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, name := range slices.Sorted(maps.Keys(required)) { // the same error on every run
		if *required[name] == "" {
			return fmt.Errorf("--%s is required", name)
		}
	}
	return nil
}

func runDeltaEncode(args []string) error {
	fs := newFlagSet("delta encode", "--old A.safetensors --new B.safetensors --out D [flags]")
	oldPath := fs.String("old", "", "safetensors checkpoint the receiver already has (required)")
	newPath := fs.String("new", "", "safetensors checkpoint to send (required)")
	out := fs.String("out", "", "delta file to write, atomically (required)")
	format := fs.String("format", "packed", "delta records: astraflow (AstraFlow's header + u32/u64 indices + raw values) or packed (\"compact\", its old name, too: gap-coded indices + low byte planes + zstd, dense when smaller)")
	threads := deltaThreads(fs)
	if err := parseRequired(fs, args, map[string]*string{"old": oldPath, "new": newPath, "out": out}); err != nil {
		return err
	}
	f, err := wire.ParseFormat(*format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	level, err := cpu.Selected()
	if err != nil {
		return err
	}
	start := time.Now()
	st, err := deltafile.Encode(*oldPath, *newPath, *out, f, *threads)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "needle delta encode: simd=%s threads=%d format=%s\n", level, *threads, f)
	fmt.Fprintf(os.Stderr, "  %d tensors: %d delta, %d full, %d removed; %d of %d elements changed (%.3f%%)\n",
		st.Tensors, st.Delta, st.Full, st.Removed, st.Changed, st.Elements, pct(st.Changed, st.Elements))
	for _, note := range st.Notes {
		fmt.Fprintf(os.Stderr, "  %s\n", note)
	}
	fmt.Fprintf(os.Stderr, "  %s: %d records, %d bytes for %d tensor bytes (%.1fx smaller) in %.2fs\n",
		*out, st.Records, st.DeltaBytes, st.TensorBytes, float64(st.TensorBytes)/float64(max(st.DeltaBytes, 1)), secs)
	return nil
}

func runDeltaApply(args []string) error {
	fs := newFlagSet("delta apply", "--base A.safetensors --delta D --out B2.safetensors [flags]")
	base := fs.String("base", "", "safetensors checkpoint the delta was encoded against (--old of encode) (required)")
	deltaPath := fs.String("delta", "", "delta file written by needle delta encode (required)")
	out := fs.String("out", "", "rebuilt checkpoint to write, atomically; equals encode's --new byte for byte (required)")
	threads := deltaThreads(fs)
	if err := parseRequired(fs, args, map[string]*string{"base": base, "delta": deltaPath, "out": out}); err != nil {
		return err
	}
	start := time.Now()
	st, err := deltafile.Apply(*base, *deltaPath, *out, *threads)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "needle delta apply: %d tensors (%d delta, %d full), %d records, %d elements changed (%.3f%%), %s written in %.2fs\n",
		st.Tensors, st.Delta, st.Full, st.Records, st.Changed, pct(st.Changed, st.Elements), *out, time.Since(start).Seconds())
	return nil
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
