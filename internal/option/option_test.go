package option

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
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

func TestPositiveAndRequired(t *testing.T) {
	if Positive("K", 1) != nil || Positive("Idle", time.Second) != nil || Required("Index", "x") != nil {
		t.Error("a value in range is refused")
	}
	for err, want := range map[error]string{
		Positive("K", 0):                "K: 0, want > 0",
		Positive("Rate", -0.5):          "Rate: -0.5, want > 0",
		Positive("Idle", 0*time.Second): "Idle: 0s, want > 0",
		Required("Index", ""):           "Index: required",
	} {
		if err == nil || err.Error() != want {
			t.Errorf("%v, want %q", err, want)
		}
	}
}
