package flatscangpu

import (
	"testing"

	"needle/testkit/cudatest"
)

func TestPTX(t *testing.T) {
	cudatest.CheckKernels(t, ptxFiles, kernelStem, "nl_topk_tile", "nl_topk_merge", "nl_topk_sort", "nl_rows_prepare", "nl_rows_random", "nl_read")
}

// TestSegments: enough blocks for a busy GPU, none with fewer than minSegment scores unless
// the tile is that small, within the segment key buffer.
func TestSegments(t *testing.T) {
	for _, c := range []struct {
		nq    int
		m     int64
		width int
		want  int
	}{
		{1, 21_015_324, 32, busyBlocks}, {1, 1000, 32, 1}, {1, 5 * minSegment, 32, 5},
		{1024, 65536, 32, 1}, {100, 1 << 24, 32, 3}, {4, 1 << 30, 16384, 66},
	} {
		if got := Segments(c.nq, c.m, c.width, 64<<20); got != c.want {
			t.Errorf("Segments(%d, %d, %d) = %d, want %d", c.nq, c.m, c.width, got, c.want)
		}
	}
}
