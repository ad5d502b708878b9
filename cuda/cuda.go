// Package cuda is needle's door to an NVIDIA GPU: a Go face on the CUDA host core of host.h
// (host.c, compiled in by cgo, and into libneedle.so the same), which opens the driver API of
// libcuda.so.1 and cuBLAS at run time (dlopen: no CUDA at build time), so one binary runs
// everywhere. Without a driver or a device, Open returns an error wrapping ErrNoDevice and
// callers use their CPU path. The first failing call on a Device marks it unhealthy: every later
// call returns that error (callers log it and fall back to the CPU), nothing aborts the process.
//
// The tests of this package cover the paths without a driver and, against the emulated driver
// (testkit/cudaemu), the core's loads, fallbacks, launches and health; code that needs a device
// is tested by its callers' GPU tests, which skip (saying why) when Open finds none.
//
// A Device is safe for concurrent use: the core runs each call in the device's primary context
// (pushed current for the call, popped after) under the device's mutex.
//
// Kernel packages launch through Function, or through their own C launchers built on host.h
// (Device.Handle, Module.Handle, Call), which libneedle.so runs too.
package cuda

/*
#cgo CFLAGS: -O2 -std=c11 -Wall
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"sync"
	"unsafe"
)

// ErrNoDevice is wrapped by every error that means "no usable CUDA here": no libcuda.so.1, a
// driver without the functions needle needs, cuInit failing, no device at that ordinal.
var ErrNoDevice = errors.New("no CUDA device")

// LibraryEnv names the environment variable that overrides the driver library path (read by
// the host core, once per process).
const LibraryEnv = "NEEDLE_CUDA_LIB"

// errBuf receives a host-core call's error text (pooled: most calls succeed and never read it).
type errBuf [C.NL_CUDA_ERR_BYTES]C.char

var errBufs = sync.Pool{New: func() any { return new(errBuf) }}

// Call runs fn, one call into the host core (host.h) or into a C launcher built on it, with an
// error buffer (err, n bytes) it passes on, and turns the status fn returns into an error: nil
// for NL_CUDA_OK, one wrapping ErrNoDevice for NL_CUDA_NODEV, else the text the call wrote.
func Call(fn func(err unsafe.Pointer, n int) int) error {
	b := errBufs.Get().(*errBuf)
	defer errBufs.Put(b)
	b[0] = 0
	return statusError(fn(unsafe.Pointer(&b[0]), len(b)), &b[0])
}

// statusError is the Go error of a host-core status st with its text at msg.
func statusError(st int, msg *C.char) error {
	switch st {
	case C.NL_CUDA_OK:
		return nil
	case C.NL_CUDA_NODEV:
		return fmt.Errorf("%w: %s", ErrNoDevice, strings.TrimPrefix(C.GoString(msg), ErrNoDevice.Error()+": "))
	}
	return errors.New(C.GoString(msg))
}

// Device is one GPU with its primary context.
type Device struct {
	h       *C.nl_device // nil once closed
	ordinal int
	name    string
}

// Open retains the primary context of GPU number ordinal.
func Open(ordinal int) (*Device, error) {
	if ordinal < math.MinInt32 || ordinal > math.MaxInt32 {
		return nil, fmt.Errorf("%w: device %d requested", ErrNoDevice, ordinal)
	}
	var h *C.nl_device
	err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_open(C.int32_t(ordinal), &h, (*C.char)(e), C.size_t(n)))
	})
	if err != nil {
		return nil, err
	}
	return &Device{h: h, ordinal: ordinal, name: C.GoString(C.nl_device_name(h))}, nil
}

// Handle is the device's nl_device (host.h), for the C launchers of kernel packages; valid
// until Close.
func (dev *Device) Handle() unsafe.Pointer { return unsafe.Pointer(dev.h) }

// Name is the device's marketing name, e.g. "NVIDIA H100 80GB HBM3".
func (dev *Device) Name() string { return dev.name }

// Ordinal is the device's number among the visible devices.
func (dev *Device) Ordinal() int { return dev.ordinal }

// Err is the error that made the device unhealthy, or nil.
func (dev *Device) Err() error {
	if dev.h == nil {
		return nil
	}
	b := errBufs.Get().(*errBuf)
	defer errBufs.Put(b)
	if C.nl_device_error(dev.h, &b[0], C.size_t(len(b))) == 0 {
		return nil
	}
	return errors.New(C.GoString(&b[0]))
}

// Count is the number of CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies),
// or an error wrapping ErrNoDevice.
func Count() (int, error) {
	var n C.int32_t
	err := Call(func(e unsafe.Pointer, m int) int {
		return int(C.nl_cuda_device_count(&n, (*C.char)(e), C.size_t(m)))
	})
	return int(n), err
}

// DriverVersion is the newest CUDA version the driver supports, 1000 x major + 10 x minor
// (12040 is 12.4), or an error wrapping ErrNoDevice.
func DriverVersion() (int, error) {
	var v C.int32_t
	err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_cuda_driver_version(&v, (*C.char)(e), C.size_t(n)))
	})
	return int(v), err
}

// Synchronize waits for the device's queued work (cuBLAS calls and Enqueue's launches are
// queued, not waited for).
func (dev *Device) Synchronize() error {
	return Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_synchronize(dev.h, (*C.char)(e), C.size_t(n)))
	})
}

// MemInfo returns the device's free and total memory in bytes.
func (dev *Device) MemInfo() (free, total uint64, err error) {
	var f, t C.uint64_t
	err = Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_mem_info(dev.h, &f, &t, (*C.char)(e), C.size_t(n)))
	})
	return uint64(f), uint64(t), err
}

// Close releases the primary context. Modules, BLAS handles and buffers must be released
// first; a second Close does nothing.
func (dev *Device) Close() error {
	if dev.h == nil {
		return nil
	}
	h := dev.h
	dev.h = nil
	return Call(func(e unsafe.Pointer, n int) int { return int(C.nl_device_close(h, (*C.char)(e), C.size_t(n))) })
}

// A kernel package embeds its ptx/ folder, where `make native` writes, for its .cu file <stem>.cu,
// <stem>_sm80.ptx (clang-16, always) and <stem>.fatbin (nvcc, where `make setup` installed it:
// sm_80 and sm_90 machine code + compute_80 PTX); see kernels/CMakeLists.txt.

// PTXPath is the path of the clang PTX of stem in a kernel package's embedded ptx/ folder.
func PTXPath(stem string) string { return "ptx/" + stem + "_sm80.ptx" }

// FatbinPath is the path of the nvcc fatbin of stem in a kernel package's embedded ptx/ folder.
func FatbinPath(stem string) string { return "ptx/" + stem + ".fatbin" }

// ReadPTX returns the PTX file path of fsys, the ptx/ folder a kernel package embeds (what
// `make native` generated there before go build), or an error saying to run `make native`.
func ReadPTX(fsys fs.FS, path string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("%s was not embedded (run `make native` before go build): %w", path, err)
	}
	return b, nil
}

// ImageEnv names the environment variable that picks which kernel image LoadKernels loads:
// "fatbin" or "ptx" only that one (the GPU check runs the kernel tests once with each, so the
// fallback is tested too); unset, the fatbin when there is one, else the PTX.
const ImageEnv = "NEEDLE_CUDA_IMAGE"

// loadErrBytes holds a load's error: a line per image, each with the driver's two JIT logs.
const loadErrBytes = 2*(2*C.NL_CUDA_JIT_LOG_BYTES) + 2*C.NL_CUDA_ERR_BYTES

// cImage is b as the host core's nl_image (b must stay alive for the call; nil: not built).
func cImage(name *C.char, b []byte) C.nl_image {
	im := C.nl_image{name: name}
	if len(b) > 0 {
		im.data, im.size = unsafe.Pointer(&b[0]), C.size_t(len(b))
	}
	return im
}

// LoadKernels loads the kernels of stem from a kernel package's embedded ptx/ folder with the
// host core's nl_module_load_kernels: the fatbin when there is one (machine code: no JIT on
// sm_80/sm_90), else, or when the driver refuses it, the clang PTX (JIT-compiled by the
// driver); ImageEnv can ask for one of them. The error of a refused image carries the driver's
// JIT log; Module.Image says which loaded.
func (dev *Device) LoadKernels(fsys fs.FS, stem string) (*Module, error) {
	var wantFatbin, wantPTX C.int
	if err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_cuda_image_choice(&wantFatbin, &wantPTX, (*C.char)(e), C.size_t(n)))
	}); err != nil {
		return nil, err
	}
	var fat, ptx []byte
	if wantFatbin != 0 {
		fat, _ = fs.ReadFile(fsys, FatbinPath(stem)) // absent: the core says it was not built
	}
	if wantPTX != 0 {
		if b, err := fs.ReadFile(fsys, PTXPath(stem)); err == nil {
			ptx = append(b, 0) // PTX is read as a NUL-terminated string
		}
	}
	fatName, ptxName := C.CString(FatbinPath(stem)), C.CString(PTXPath(stem))
	defer C.free(unsafe.Pointer(fatName))
	defer C.free(unsafe.Pointer(ptxName))
	m := &Module{dev: dev}
	var loadedPTX C.int32_t
	msg := make([]C.char, loadErrBytes)
	st := C.nl_module_load_kernels(dev.h, cImage(fatName, fat), cImage(ptxName, ptx), &m.h, &loadedPTX, &msg[0], C.size_t(len(msg)))
	if err := statusError(int(st), &msg[0]); err != nil {
		return nil, err
	}
	m.Image = FatbinPath(stem)
	if loadedPTX != 0 {
		m.Image = PTXPath(stem)
	}
	return m, nil
}

// Module is a loaded fatbin or PTX (JIT-compiled by the driver for the device).
type Module struct {
	dev *Device
	h   *C.nl_module
	// Image names what was loaded (LoadKernels: the fatbin or the PTX file).
	Image string
}

// Handle is the module's nl_module (host.h), for the C launchers of kernel packages; valid
// until Unload.
func (m *Module) Handle() unsafe.Pointer { return unsafe.Pointer(m.h) }

// Unload frees the module.
func (m *Module) Unload() error {
	return Call(func(e unsafe.Pointer, n int) int { return int(C.nl_module_unload(m.h, (*C.char)(e), C.size_t(n))) })
}

// Function is one kernel (an `extern "C" __global__` name) of a module.
type Function struct {
	f C.nl_function
}

// Function finds a kernel by name.
func (m *Module) Function(name string) (*Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	f := &Function{}
	err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_module_function(m.h, cname, &f.f, (*C.char)(e), C.size_t(n)))
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Launch runs the kernel and waits for it. Each argument is a kernel parameter of 8 bytes or
// less, passed by value in order: a Buffer (as its device pointer), int64, int32, uint64, float32.
func (f *Function) Launch(grid, block Dim3, args ...any) error {
	return f.launch(grid, block, true, args)
}

// Enqueue queues the kernel on the default stream and returns without waiting, so that a
// sequence of kernels and cuBLAS calls runs without host round trips between them. A failure
// of the kernel itself surfaces at the next call that waits (Launch, Download, Synchronize).
func (f *Function) Enqueue(grid, block Dim3, args ...any) error {
	return f.launch(grid, block, false, args)
}

// launchBuf is one launch's C-side arguments (pooled: a launch allocates nothing).
type launchBuf struct {
	args        [C.NL_CUDA_MAX_ARGS]C.uint64_t
	grid, block [3]C.uint32_t
	err         errBuf
}

var launchBufs = sync.Pool{New: func() any { return new(launchBuf) }}

func (f *Function) launch(grid, block Dim3, wait bool, args []any) error {
	b := launchBufs.Get().(*launchBuf)
	defer launchBufs.Put(b)
	if err := paramValues(b.args[:], args); err != nil {
		return fmt.Errorf("cuda launch %s: %w", C.GoString(&f.f.name[0]), err)
	}
	b.grid = [3]C.uint32_t{C.uint32_t(grid.X), C.uint32_t(grid.Y), C.uint32_t(grid.Z)}
	b.block = [3]C.uint32_t{C.uint32_t(block.X), C.uint32_t(block.Y), C.uint32_t(block.Z)}
	w := C.int32_t(0)
	if wait {
		w = 1
	}
	b.err[0] = 0
	st := C.nl_function_launch(&f.f, &b.grid[0], &b.block[0], 0, &b.args[0], C.int32_t(len(args)), w,
		&b.err[0], C.size_t(len(b.err)))
	return statusError(int(st), &b.err[0])
}

// paramValues lays each kernel argument out in its own 8-byte slot of dst, as host.h's
// nl_function_launch takes them (little-endian, narrower types in the low bytes).
func paramValues[T ~uint64](dst []T, args []any) error {
	if len(args) > len(dst) {
		return fmt.Errorf("%d arguments, at most %d", len(args), len(dst))
	}
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			dst[i] = T(v.ptr)
		case int64:
			dst[i] = T(v)
		case int32:
			dst[i] = T(uint32(v))
		case uint64:
			dst[i] = T(v)
		case float32:
			dst[i] = T(math.Float32bits(v))
		default:
			return fmt.Errorf("argument %d has unsupported type %T", i, a)
		}
	}
	return nil
}

// Buffer is device memory.
type Buffer struct {
	dev  *Device
	ptr  uint64
	size int
}

// Alloc reserves size bytes (at least 1) of device memory.
func (dev *Device) Alloc(size int) (*Buffer, error) {
	b := &Buffer{dev: dev, size: max(size, 1)}
	var p C.uint64_t
	err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_alloc(dev.h, C.uint64_t(b.size), &p, (*C.char)(e), C.size_t(n)))
	})
	if err != nil {
		return nil, err
	}
	b.ptr = uint64(p)
	return b, nil
}

// Upload copies host bytes src into the start of the buffer.
func (b *Buffer) Upload(src unsafe.Pointer, n int) error { return b.UploadAt(0, src, n) }

// UploadAt copies n host bytes from src into the buffer at byte offset off.
func (b *Buffer) UploadAt(off int, src unsafe.Pointer, n int) error {
	if off < 0 || n < 0 || n > b.size-off {
		return fmt.Errorf("cuda upload: %d bytes at offset %d into a %d-byte buffer", n, off, b.size)
	}
	return Call(func(e unsafe.Pointer, m int) int {
		return int(C.nl_device_upload(b.dev.h, C.uint64_t(b.ptr+uint64(off)), src, C.uint64_t(n), (*C.char)(e), C.size_t(m)))
	})
}

// Download copies the first n bytes of the buffer to host memory dst.
func (b *Buffer) Download(dst unsafe.Pointer, n int) error {
	if n < 0 || n > b.size {
		return fmt.Errorf("cuda download: %d bytes from a %d-byte buffer", n, b.size)
	}
	return Call(func(e unsafe.Pointer, m int) int {
		return int(C.nl_device_download(b.dev.h, dst, C.uint64_t(b.ptr), C.uint64_t(n), (*C.char)(e), C.size_t(m)))
	})
}

// Free releases the buffer.
func (b *Buffer) Free() error {
	return Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_free(b.dev.h, C.uint64_t(b.ptr), (*C.char)(e), C.size_t(n)))
	})
}

// Addr is the device address off bytes into the buffer, for kernel arguments and cuBLAS
// operands that start inside it; off must be within the buffer.
func (b *Buffer) Addr(off int) uint64 {
	if off < 0 || off > b.size {
		panic(fmt.Sprintf("cuda: offset %d outside a %d-byte buffer", off, b.size))
	}
	return b.ptr + uint64(off)
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() int { return b.size }

// HostBuffer is pinned (page-locked) host memory, the staging area of large uploads: the
// driver copies from it by DMA, and its size bounds the host memory a streamed load uses.
type HostBuffer struct {
	dev   *Device
	p     unsafe.Pointer
	Bytes []byte // the whole buffer
}

// AllocHost pins size bytes (at least 1) of host memory, usable with every device (portable).
func (dev *Device) AllocHost(size int) (*HostBuffer, error) {
	h := &HostBuffer{dev: dev}
	var p unsafe.Pointer
	err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_host_alloc(dev.h, C.uint64_t(max(size, 1)), &p, (*C.char)(e), C.size_t(n)))
	})
	if err != nil {
		return nil, err
	}
	h.p = p
	h.Bytes = unsafe.Slice((*byte)(p), max(size, 1))
	return h, nil
}

// Free releases the pinned memory; Bytes must not be used after.
func (h *HostBuffer) Free() error {
	h.Bytes = nil
	return Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_device_host_free(h.dev.h, h.p, (*C.char)(e), C.size_t(n)))
	})
}
