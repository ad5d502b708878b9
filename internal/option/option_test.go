package option

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestError(t *testing.T) {
	err := Wrap("Index", os.ErrNotExist)
	var e *Error
	if err.Error() != "Index: file does not exist" || !errors.Is(err, os.ErrNotExist) || !errors.As(err, &e) || e.Field != "Index" {
		t.Errorf("Wrap: %v", err)
	}
	if Wrap("Index", nil) != nil {
		t.Error("Wrap of nil is not nil")
	}
	if err := Errorf("Fusion.Weight", "%g, want (0, 1]", 2.0); err.Error() != "Fusion.Weight: 2, want (0, 1]" {
		t.Errorf("Errorf: %v", err)
	}
}

func TestFix(t *testing.T) {
	err := Fixf("Restart", "replaces it", "%s holds another build", "out")
	var f *Fix
	if err.Error() != "out holds another build (Restart replaces it)" || !errors.As(err, &f) || f.Hint("--restart") != "(--restart replaces it)" ||
		!FixedBy(fmt.Errorf("build: %w", err), "Restart") || FixedBy(err, "Out") || FixedBy(os.ErrNotExist, "Restart") {
		t.Errorf("Fixf: %v", err)
	}
}

func TestRequired(t *testing.T) {
	if Required("Index", "x") != nil {
		t.Error("a value is refused")
	}
	if err := Required("Index", ""); err == nil || err.Error() != "Index: required" {
		t.Errorf("%v, want Index: required", err)
	}
}
