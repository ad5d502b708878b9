package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"needle/internal/option"
)

// flagError names the flag of every option error it knows, wherever it sits in the tree
// (wrapped, joined), keeps the rest of the message and the chain, and leaves other errors alone.
func TestFlagError(t *testing.T) {
	flags := map[string]string{"Index": "--index", "Fusion.Weight": "--fusion-weight", "Restart": "--restart"}
	weight := option.Errorf("Fusion.Weight", "%g, want (0, 1]", 2.0)
	missing := option.Wrap("Index", os.ErrNotExist)
	for _, c := range []struct {
		err  error
		want string
	}{
		{weight, "--fusion-weight: 2, want (0, 1]"},
		{fmt.Errorf("open: %w", missing), "open: --index: file does not exist"},
		{errors.Join(missing, option.Errorf("Model", "required")), "--index: file does not exist\nModel: required"},
		{option.Wrap("Index", weight), "--index: --fusion-weight: 2, want (0, 1]"},
		{os.ErrNotExist, "file does not exist"},
		{fmt.Errorf("build: %w", option.Fixf("Restart", "replaces it", "out holds another build")), "build: out holds another build (--restart replaces it)"},
		{option.Fixf("Out", "moves it", "x"), "x (Out moves it)"},
	} {
		got := flagError(c.err, flags)
		if got.Error() != c.want || !errors.Is(got, c.err) {
			t.Errorf("flagError(%q) = %q, want %q (wrapping the error)", c.err, got, c.want)
		}
	}
	if flagError(nil, flags) != nil {
		t.Error("flagError(nil) is not nil")
	}
}

// needle bench's option errors name its flags too (every required and positive check).
func TestBenchErrorsNameFlags(t *testing.T) {
	err := runBenchIndex([]string{"--queries", "q.f32", "--batch", "0"})
	if err == nil || err.Error() != "--index: required\n--batch: 0, want > 0" {
		t.Errorf("bench index: %v", err)
	}
}

// needle serve refuses a --fusion-weight outside (0, 1] before it loads anything, naming the flag.
func TestServeRefusesFusionWeightOutOfRange(t *testing.T) {
	for _, w := range []string{"0", "-0.5", "1.5", "NaN"} {
		err := runServe([]string{"--index", t.TempDir(), "--bm25", t.TempDir(), "--fusion", "weighted", "--fusion-weight", w})
		if err == nil || !strings.HasPrefix(err.Error(), "--fusion-weight: ") || !strings.Contains(err.Error(), "want the dense share") {
			t.Errorf("--fusion-weight %s: %v, want a refusal naming --fusion-weight", w, err)
		}
	}
}
