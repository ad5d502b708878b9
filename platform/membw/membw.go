// Package membw measures the machine's memory read bandwidth: the ceiling `needle bench kernels`
// reports every bandwidth-bound kernel against, measured in the same run. The read loops are C,
// one per SIMD level (full-width vector loads), and Bandwidth keeps the fastest of those up to
// the level package platform/cpu selects, so no kernel is measured against a slower
// reader than one it could have used.
package membw

/*
#cgo CFLAGS: -O3
#include "membw.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"needle/platform/cpu"
)

// Sum reads every word of words once (one cgo call) at the selected SIMD level and returns
// their wrapping sum. A bad NEEDLE_SIMD reads with the scalar reference (the kernels report it).
func Sum(words []uint64) uint64 {
	l, _ := cpu.Selected()
	return SumAt(l, words)
}

// SumAt is Sum at SIMD level l (tests compare every level the CPU runs).
func SumAt(l cpu.Level, words []uint64) uint64 {
	if len(words) == 0 {
		return 0
	}
	return uint64(C.nl_membw_read(C.int32_t(l), (*C.uint64_t)(unsafe.Pointer(&words[0])), C.size_t(len(words))))
}

// Buffer is a read target larger than the caches; reuse one across measurements.
type Buffer struct {
	words []uint64
}

// NewBuffer allocates and touches bytes (rounded down to 8) of memory, so no page fault lands
// in a measurement.
func NewBuffer(bytes int) (*Buffer, error) {
	if bytes < 8 {
		return nil, fmt.Errorf("membw: buffer of %d bytes is too small", bytes)
	}
	w := make([]uint64, bytes/8)
	for i := range w {
		w[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	return &Buffer{words: w}, nil
}

// Bytes is the buffer size.
func (b *Buffer) Bytes() int64 { return int64(len(b.words)) * 8 }

// readAt reads the whole buffer once at level l with threads goroutines (one contiguous slice
// and one cgo call each) and returns the wall time and the sum (checked by tests against Sum).
func (b *Buffer) readAt(l cpu.Level, threads int) (time.Duration, uint64) {
	threads = max(threads, 1)
	sums := make([]uint64, threads)
	var wg sync.WaitGroup
	start := time.Now()
	for k := 0; k < threads; k++ {
		lo, hi := len(b.words)*k/threads, len(b.words)*(k+1)/threads
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[k] = SumAt(l, b.words[lo:hi])
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var total uint64
	for _, s := range sums {
		total += s
	}
	return elapsed, total
}

// Bandwidth is the best read rate, in bytes per second, of repeats whole-buffer reads with the
// loop of every level up to the selected one, taken in turn: a kernel of a level may use any of
// those loops' instructions, and which reads fastest depends on the machine (Zen 4, 1 thread, CPU
// time: the AVX2 loop read 25-28 GB/s and the AVX-512 one 21-26 on 4 KiB pages; on 2 MiB pages
// AVX2 31-33 and AVX-512 33-35).
func (b *Buffer) Bandwidth(threads, repeats int) float64 {
	sel, _ := cpu.Selected()
	best := time.Duration(1<<63 - 1)
	for r := 0; r < max(repeats, 1); r++ {
		for _, l := range cpu.LevelsUpTo(min(sel, cpu.AVX512)) {
			if d, _ := b.readAt(l, threads); d < best {
				best = d
			}
		}
	}
	return float64(b.Bytes()) / best.Seconds()
}
