package cuda_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unsafe"

	"needle/cuda"
	"needle/testkit/cudatest"
)

// TestWithoutGPUEmulatedRefusals drives package cuda against the emulated driver (in a child
// process, with CUDAEMU_REFUSE=fatbin: the driver refuses fatbins as one without an image for
// its GPU does): a refused image's error carries the driver's JIT error log and the device stays
// healthy; LoadKernels then falls back to the PTX; an image that is neither is refused with its
// log; an unknown kernel is a driver error that marks the device unhealthy.
func TestWithoutGPUEmulatedRefusals(t *testing.T) {
	if os.Getenv("CUDAEMU_REFUSE") == "" {
		cudatest.RunEmulated(t, "TestWithoutGPUEmulatedRefusals", "CUDAEMU_REFUSE=fatbin")
		return
	}
	dev := cudatest.Device(t)
	fsys := fstest.MapFS{
		"ptx/k.fatbin":   {Data: []byte{0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		"ptx/k_sm80.ptx": {Data: []byte(".version 7.0\n.target sm_80\n")},
	}
	t.Setenv(cuda.ImageEnv, "fatbin")
	_, err := dev.LoadKernels(fsys, "k")
	if err == nil || !strings.Contains(err.Error(), `ptx/k.fatbin: cuda load module: no kernel image is available for execution on the device (CUDA error 209); JIT error log: "cudaemu: no image for this GPU in the fatbin (CUDAEMU_REFUSE=fatbin)"`) {
		t.Fatalf("refused fatbin: %v", err)
	}
	if dev.Err() != nil {
		t.Fatalf("a refused image made the device unhealthy: %v", dev.Err())
	}
	t.Setenv(cuda.ImageEnv, "")
	m, err := dev.LoadKernels(fsys, "k")
	if err != nil || m.Image != "ptx/k_sm80.ptx" {
		t.Fatalf("fallback to the PTX: %v, %+v", err, m)
	}
	garbage := fstest.MapFS{"ptx/g_sm80.ptx": {Data: []byte("not an image")}}
	if _, err := dev.LoadKernels(garbage, "g"); err == nil || !strings.Contains(err.Error(), "neither a fatbin nor PTX") {
		t.Fatalf("garbage image: %v", err)
	}
	if _, err := m.Function("nl_no_such_kernel"); err == nil || !strings.Contains(err.Error(), "named symbol not found") || dev.Err() == nil {
		t.Fatalf("unknown kernel: %v (device error %v)", err, dev.Err())
	}
}

// TestWithoutGPUEmulatedHealth drives the host core's memory and cuBLAS calls against the
// emulated driver (whose cublasGemmEx is written from cuBLAS's definition): a GEMM through
// pinned memory gives the product; then a GEMM the driver refuses names the call
// and its status, marks the device unhealthy, and every later call says so with that first error.
func TestWithoutGPUEmulatedHealth(t *testing.T) {
	if os.Getenv(cuda.LibraryEnv) == "" {
		cudatest.RunEmulated(t, "TestWithoutGPUEmulatedHealth")
		return
	}
	dev := cudatest.DeviceWithBLAS(t)
	blas, err := dev.NewBLAS()
	if err != nil {
		t.Fatal(err)
	}
	host, err := dev.AllocHost(3 * 16)
	if err != nil {
		t.Fatal(err)
	}
	// Column-major 2 x 2: A = [1 3; 2 4], B = I * 2, so C = 2A.
	vals := unsafe.Slice((*float32)(unsafe.Pointer(&host.Bytes[0])), 12)
	copy(vals, []float32{1, 2, 3, 4, 2, 0, 0, 2})
	buf, err := dev.Alloc(3 * 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := buf.Upload(unsafe.Pointer(&host.Bytes[0]), 32); err != nil {
		t.Fatal(err)
	}
	if err := blas.GemmEx(cuda.OpN, cuda.OpN, 2, 2, 2, 1, buf.Addr(0), 2, buf.Addr(16), 2, cuda.R32F, 0, buf.Addr(32), 2); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(dev.Synchronize(), buf.Download(unsafe.Pointer(&host.Bytes[0]), 48)); err != nil {
		t.Fatal(err)
	}
	if got := vals[8:12]; !slices.Equal(got, []float32{2, 4, 6, 8}) {
		t.Fatalf("GemmEx: %v, want [2 4 6 8]", got)
	}
	if free, total, err := dev.MemInfo(); err != nil || free == 0 || total < free {
		t.Fatalf("MemInfo: %d of %d, %v", free, total, err)
	}

	const fp64 = 1 // CUDA_R_64F: not a type needle's GEMMs take
	err = blas.GemmEx(cuda.OpN, cuda.OpN, 2, 2, 2, 1, buf.Addr(0), 2, buf.Addr(16), 2, fp64, 0, buf.Addr(32), 2)
	const first = "cuda cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED (15)"
	if err == nil || err.Error() != first {
		t.Fatalf("GemmEx of fp64: %v, want %q", err, first)
	}
	if dev.Err() == nil || dev.Err().Error() != first {
		t.Fatalf("device error %v, want %q", dev.Err(), first)
	}
	if _, err := dev.Alloc(8); err == nil || err.Error() != "cuda alloc: device unhealthy: "+first {
		t.Fatalf("alloc on an unhealthy device: %v", err)
	}
}
