package blascore

import (
	"os"
	"testing"

	"needle/platform/cpu"
)

func TestCoreMatchesISA(t *testing.T) {
	if os.Getenv("OPENBLAS_CORETYPE") != "" {
		t.Skip("OPENBLAS_CORETYPE chooses the core")
	}
	if core := Name(); cpu.Supported() >= cpu.AVX2 && core == "Prescott" {
		t.Errorf("OpenBLAS runs its SSE3 Prescott kernels on a %s CPU", cpu.Supported())
	}
}
