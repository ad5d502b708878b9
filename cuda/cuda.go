// Package cuda is needle's door to an NVIDIA GPU: the CUDA driver API of libcuda.so.1, opened at
// run time with purego (no cgo, no CUDA at build time), so one binary runs everywhere. Without a
// driver or a device, Open returns an error wrapping ErrNoDevice and callers use their CPU path.
// The first failing driver call marks the Device unhealthy: every later call returns that error
// (callers log it and fall back to the CPU), nothing aborts the process.
//
// The tests of this package cover the paths without a driver; code that needs a device is tested
// by its callers' GPU tests, which skip (saying why) when Open finds none.
//
// A Device is safe for concurrent use: each operation locks its goroutine to an OS thread, makes
// the device's primary context current there and runs under the device mutex.
package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNoDevice is wrapped by every error that means "no usable CUDA here": no libcuda.so.1, a
// driver without the functions needle needs, cuInit failing, no device at that ordinal.
var ErrNoDevice = errors.New("no CUDA device")

// LibraryEnv names the environment variable that overrides the driver library path.
const LibraryEnv = "NEEDLE_CUDA_LIB"

// driver holds the driver API entry points (CUresult is int32; 0 is CUDA_SUCCESS).
type driver struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGetCount          func(count *int32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceGetName           func(name *byte, n int32, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuModuleLoadDataEx        func(mod *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) int32
	cuModuleUnload            func(mod uintptr) int32
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) int32
	cuMemAlloc                func(dptr *uint64, size uint64) int32
	cuMemFree                 func(dptr uint64) int32
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) int32
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32
	cuGetErrorString          func(res int32, str **byte) int32
	cuDriverGetVersion        func(version *int32) int32
	cuMemGetInfo              func(free, total *uint64) int32
	cuMemHostAlloc            func(p *unsafe.Pointer, size uint64, flags uint32) int32
	cuMemFreeHost             func(p unsafe.Pointer) int32
	cuStreamCreate            func(stream *uintptr, flags uint32) int32
	cuStreamDestroy           func(stream uintptr) int32
}

var (
	loadOnce sync.Once
	drv      *driver
	drvErr   error
)

// load opens the driver library once and resolves every entry point (versioned names as the
// CUDA headers map them).
func load() (*driver, error) {
	loadOnce.Do(func() {
		path := "libcuda.so.1"
		if p := os.Getenv(LibraryEnv); p != "" {
			path = p
		}
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			drvErr = fmt.Errorf("%w: cannot load the CUDA driver: %v", ErrNoDevice, err)
			return
		}
		d := &driver{}
		syms := []symbol{
			{&d.cuInit, "cuInit"}, {&d.cuDeviceGetCount, "cuDeviceGetCount"},
			{&d.cuDeviceGet, "cuDeviceGet"}, {&d.cuDeviceGetName, "cuDeviceGetName"},
			{&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
			{&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
			{&d.cuCtxSetCurrent, "cuCtxSetCurrent"}, {&d.cuCtxSynchronize, "cuCtxSynchronize"},
			{&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"}, {&d.cuModuleUnload, "cuModuleUnload"},
			{&d.cuModuleGetFunction, "cuModuleGetFunction"}, {&d.cuMemAlloc, "cuMemAlloc_v2"},
			{&d.cuMemFree, "cuMemFree_v2"}, {&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
			{&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"}, {&d.cuLaunchKernel, "cuLaunchKernel"},
			{&d.cuGetErrorString, "cuGetErrorString"}, {&d.cuMemGetInfo, "cuMemGetInfo_v2"},
			{&d.cuDriverGetVersion, "cuDriverGetVersion"},
			{&d.cuMemHostAlloc, "cuMemHostAlloc"}, {&d.cuMemFreeHost, "cuMemFreeHost"},
			{&d.cuStreamCreate, "cuStreamCreate"}, {&d.cuStreamDestroy, "cuStreamDestroy_v2"},
		}
		if missing := bind(h, syms); missing != "" {
			drvErr = fmt.Errorf("%w: %s has no %s (driver too old?)", ErrNoDevice, path, missing)
			return
		}
		if rc := d.cuInit(0); rc != 0 {
			drvErr = fmt.Errorf("%w: cuInit: %s", ErrNoDevice, d.describe(rc))
			return
		}
		drv = d
	})
	return drv, drvErr
}

// symbol is a C function of a library and the Go function variable it is bound to.
type symbol struct {
	fn   any
	name string
}

// bind resolves every symbol in the library handle h, or returns the first missing name.
func bind(h uintptr, syms []symbol) (missing string) {
	for _, s := range syms {
		sym, err := purego.Dlsym(h, s.name)
		if err != nil {
			return s.name
		}
		purego.RegisterFunc(s.fn, sym)
	}
	return ""
}

// describe turns a CUresult into text.
func (d *driver) describe(rc int32) string {
	var p *byte // a static string of the driver
	if d.cuGetErrorString(rc, &p) != 0 || p == nil {
		return fmt.Sprintf("CUDA error %d", rc)
	}
	n := 0
	for n < 256 && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return fmt.Sprintf("%s (CUDA error %d)", unsafe.String(p, n), rc)
}

// Device is one GPU with its primary context.
type Device struct {
	d       *driver
	ordinal int32
	name    string
	ctx     uintptr

	mu  sync.Mutex
	err error // first failure; the device is unhealthy once set
}

// Open retains the primary context of GPU number ordinal.
func Open(ordinal int) (*Device, error) {
	d, err := load()
	if err != nil {
		return nil, err
	}
	var count int32
	if rc := d.cuDeviceGetCount(&count); rc != 0 {
		return nil, fmt.Errorf("%w: cuDeviceGetCount: %s", ErrNoDevice, d.describe(rc))
	}
	if ordinal < 0 || ordinal >= int(count) {
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, ordinal, count)
	}
	dev := &Device{d: d}
	if rc := d.cuDeviceGet(&dev.ordinal, int32(ordinal)); rc != 0 {
		return nil, fmt.Errorf("%w: cuDeviceGet(%d): %s", ErrNoDevice, ordinal, d.describe(rc))
	}
	var name [128]byte
	if d.cuDeviceGetName(&name[0], int32(len(name)), dev.ordinal) == 0 {
		for i, c := range name {
			if c == 0 {
				dev.name = string(name[:i])
				break
			}
		}
	}
	if rc := d.cuDevicePrimaryCtxRetain(&dev.ctx, dev.ordinal); rc != 0 {
		return nil, fmt.Errorf("%w: cuDevicePrimaryCtxRetain: %s", ErrNoDevice, d.describe(rc))
	}
	return dev, nil
}

// Name is the device's marketing name, e.g. "NVIDIA H100 80GB HBM3".
func (dev *Device) Name() string { return dev.name }

// Err is the error that made the device unhealthy, or nil.
func (dev *Device) Err() error {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	return dev.err
}

// do runs fn with the device's context current on a locked OS thread. A failing CUresult from
// fn marks the device unhealthy; an unhealthy device runs nothing.
func (dev *Device) do(what string, fn func(d *driver) int32) error {
	return dev.call(what, func() error {
		if rc := fn(dev.d); rc != 0 {
			return fmt.Errorf("cuda %s: %s", what, dev.d.describe(rc))
		}
		return nil
	})
}

// call is do for any library of the device (the driver, cuBLAS): fn runs with the context
// current under the device mutex, and its error marks the device unhealthy.
func (dev *Device) call(what string, fn func() error) error {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.err != nil {
		return fmt.Errorf("cuda %s: device unhealthy: %w", what, dev.err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if rc := dev.d.cuCtxSetCurrent(dev.ctx); rc != 0 {
		dev.err = fmt.Errorf("cuda %s: set context: %s", what, dev.d.describe(rc))
		return dev.err
	}
	if err := fn(); err != nil {
		dev.err = err
		return err
	}
	return nil
}

// Count is the number of CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies),
// or an error wrapping ErrNoDevice.
func Count() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	var n int32
	if rc := d.cuDeviceGetCount(&n); rc != 0 {
		return 0, fmt.Errorf("%w: cuDeviceGetCount: %s", ErrNoDevice, d.describe(rc))
	}
	return int(n), nil
}

// DriverVersion is the newest CUDA version the driver supports, 1000 x major + 10 x minor
// (12040 is 12.4), or an error wrapping ErrNoDevice.
func DriverVersion() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	var v int32
	if rc := d.cuDriverGetVersion(&v); rc != 0 {
		return 0, fmt.Errorf("%w: cuDriverGetVersion: %s", ErrNoDevice, d.describe(rc))
	}
	return int(v), nil
}

// Ordinal is the device's number among the visible devices.
func (dev *Device) Ordinal() int { return int(dev.ordinal) }

// Synchronize waits for the device's queued work (cuBLAS calls are queued, not waited for).
func (dev *Device) Synchronize() error {
	return dev.do("synchronize", func(d *driver) int32 { return d.cuCtxSynchronize() })
}

// MemInfo returns the device's free and total memory in bytes.
func (dev *Device) MemInfo() (free, total uint64, err error) {
	err = dev.do("mem get info", func(d *driver) int32 { return d.cuMemGetInfo(&free, &total) })
	return free, total, err
}

// Close releases the primary context. Modules and buffers must be released first.
func (dev *Device) Close() error {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if rc := dev.d.cuDevicePrimaryCtxRelease(dev.ordinal); rc != 0 {
		return fmt.Errorf("cuda: release context: %s", dev.d.describe(rc))
	}
	return nil
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

// LoadKernels loads the kernels of stem from a kernel package's embedded ptx/ folder: the
// fatbin when there is one (machine code: no JIT on sm_80/sm_90), else, or when the driver
// refuses it, the clang PTX (JIT-compiled by the driver); ImageEnv can ask for one of them.
// The error of a refused image carries the driver's JIT log; Module.Image says which loaded.
func (dev *Device) LoadKernels(fsys fs.FS, stem string) (*Module, error) {
	want := os.Getenv(ImageEnv)
	if want != "" && want != "fatbin" && want != "ptx" {
		return nil, fmt.Errorf("cuda: %s=%q: want fatbin or ptx", ImageEnv, want)
	}
	var errs []error
	if want != "ptx" {
		fat, err := fs.ReadFile(fsys, FatbinPath(stem))
		if err == nil {
			var m *Module
			if m, err = dev.LoadModule(fat); err == nil {
				m.Image = FatbinPath(stem)
				return m, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", FatbinPath(stem), err))
		if want == "fatbin" {
			return nil, errors.Join(errs...)
		}
	}
	ptx, err := ReadPTX(fsys, PTXPath(stem))
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	m, err := dev.LoadModule(append(ptx, 0)) // PTX is read as a NUL-terminated string
	if err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("%s: %w", PTXPath(stem), err))...)
	}
	m.Image = PTXPath(stem)
	return m, nil
}

// Module is a loaded fatbin or PTX (JIT-compiled by the driver for the device).
type Module struct {
	dev *Device
	h   uintptr
	// Image names what was loaded (LoadKernels: the fatbin or the PTX file).
	Image string
}

// jitLogBytes is the size of each of the driver's JIT logs (error and info) a load keeps.
const jitLogBytes = 16 << 10

// LoadModule loads a module image: a fatbin, a cubin or NUL-terminated PTX text. When the
// driver refuses it, the error carries the JIT compiler's error and info logs (ptxas's
// messages: the line, the instruction, the missing feature), and the device stays usable (a
// refused image is a property of the image, not a failing device).
func (dev *Device) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.New("cuda load module: empty image")
	}
	m := &Module{dev: dev}
	errLog, infoLog := make([]byte, jitLogBytes), make([]byte, jitLogBytes)
	const (
		jitInfoLogBuffer      = 3  // CU_JIT_INFO_LOG_BUFFER
		jitInfoLogBufferSize  = 4  // CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
		jitErrorLogBuffer     = 5  // CU_JIT_ERROR_LOG_BUFFER
		jitErrorLogBufferSize = 6  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
		jitLogVerbose         = 12 // CU_JIT_LOG_VERBOSE
	)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize, jitInfoLogBuffer, jitInfoLogBufferSize, jitLogVerbose}
	// The driver reads each value as a pointer-sized word: buffers as pointers, sizes and flags
	// as integers; it writes the logs' lengths back into the size slots.
	vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), jitLogBytes, uintptr(unsafe.Pointer(&infoLog[0])), jitLogBytes, 1}
	var pin runtime.Pinner // vals hides the logs' addresses from the garbage collector
	defer pin.Unpin()
	pin.Pin(&errLog[0])
	pin.Pin(&infoLog[0])
	var rc int32
	err := dev.call("load module", func() error {
		rc = dev.d.cuModuleLoadDataEx(&m.h, unsafe.Pointer(&image[0]), uint32(len(opts)), &opts[0], &vals[0])
		if rc != 0 && !refusedImage(rc) {
			return fmt.Errorf("cuda load module: %s", dev.d.describe(rc))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rc != 0 {
		return nil, fmt.Errorf("cuda load module: %s; JIT error log: %q; JIT info log: %q", dev.d.describe(rc),
			cString(errLog, vals[1]), cString(infoLog, vals[3]))
	}
	return m, nil
}

// refusedImage reports whether a load's CUresult means the image does not suit this device
// or driver (the device itself is fine).
func refusedImage(rc int32) bool {
	switch rc {
	case 200, // CUDA_ERROR_INVALID_IMAGE
		209, // CUDA_ERROR_NO_BINARY_FOR_GPU
		218, // CUDA_ERROR_INVALID_PTX
		221, // CUDA_ERROR_JIT_COMPILER_NOT_FOUND
		222: // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
		return true
	}
	return false
}

// cString is the text of a log buffer the driver filled: up to n bytes (what it reports
// written) and the first NUL.
func cString(b []byte, n uintptr) string {
	b = b[:min(int(n), len(b))]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Unload frees the module.
func (m *Module) Unload() error {
	return m.dev.do("unload module", func(d *driver) int32 { return d.cuModuleUnload(m.h) })
}

// Function is one kernel (an `extern "C" __global__` name) of a module.
type Function struct {
	dev  *Device
	h    uintptr
	name string
}

// Function finds a kernel by name.
func (m *Module) Function(name string) (*Function, error) {
	cname := append([]byte(name), 0)
	f := &Function{dev: m.dev, name: name}
	err := m.dev.do("get function "+name, func(d *driver) int32 {
		return d.cuModuleGetFunction(&f.h, m.h, &cname[0])
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

func (f *Function) launch(grid, block Dim3, wait bool, args []any) error {
	vals, err := paramValues(args)
	if err != nil {
		return fmt.Errorf("cuda launch %s: %w", f.name, err)
	}
	// cuLaunchKernel reads params[i] -> the bytes of argument i (during the call); both arrays
	// are pinned Go memory.
	params := make([]unsafe.Pointer, len(vals)+1) // +1: never empty
	var pin runtime.Pinner
	defer pin.Unpin()
	for i := range vals {
		pin.Pin(&vals[i])
		params[i] = unsafe.Pointer(&vals[i])
	}
	pin.Pin(&params[0])
	return f.dev.do("launch "+f.name, func(d *driver) int32 {
		rc := d.cuLaunchKernel(f.h, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, 0, 0, unsafe.Pointer(&params[0]), nil)
		if rc != 0 || !wait {
			return rc
		}
		return d.cuCtxSynchronize()
	})
}

// paramValues lays each kernel argument out in its own 8-byte little-endian slot, as the
// driver reads parameters of at most 8 bytes (narrower types use the low bytes).
func paramValues(args []any) ([]uint64, error) {
	vals := make([]uint64, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			vals[i] = v.ptr
		case int64:
			vals[i] = uint64(v)
		case int32:
			vals[i] = uint64(uint32(v))
		case uint64:
			vals[i] = v
		case float32:
			vals[i] = uint64(math.Float32bits(v))
		default:
			return nil, fmt.Errorf("argument %d has unsupported type %T", i, a)
		}
	}
	return vals, nil
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
	err := dev.do("alloc", func(d *driver) int32 { return d.cuMemAlloc(&b.ptr, uint64(b.size)) })
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Upload copies host bytes src into the start of the buffer.
func (b *Buffer) Upload(src unsafe.Pointer, n int) error { return b.UploadAt(0, src, n) }

// UploadAt copies n host bytes from src into the buffer at byte offset off.
func (b *Buffer) UploadAt(off int, src unsafe.Pointer, n int) error {
	if off < 0 || n > b.size-off {
		return fmt.Errorf("cuda upload: %d bytes at offset %d into a %d-byte buffer", n, off, b.size)
	}
	if n == 0 {
		return nil
	}
	return b.dev.do("upload", func(d *driver) int32 { return d.cuMemcpyHtoD(b.ptr+uint64(off), src, uint64(n)) })
}

// Download copies the first n bytes of the buffer to host memory dst.
func (b *Buffer) Download(dst unsafe.Pointer, n int) error {
	if n > b.size {
		return fmt.Errorf("cuda download: %d bytes from a %d-byte buffer", n, b.size)
	}
	if n == 0 {
		return nil
	}
	return b.dev.do("download", func(d *driver) int32 { return d.cuMemcpyDtoH(dst, b.ptr, uint64(n)) })
}

// Free releases the buffer.
func (b *Buffer) Free() error {
	return b.dev.do("free", func(d *driver) int32 { return d.cuMemFree(b.ptr) })
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
	const portable = 1 // CU_MEMHOSTALLOC_PORTABLE
	err := dev.do("host alloc", func(d *driver) int32 { return d.cuMemHostAlloc(&h.p, uint64(max(size, 1)), portable) })
	if err != nil {
		return nil, err
	}
	h.Bytes = unsafe.Slice((*byte)(h.p), max(size, 1))
	return h, nil
}

// Free releases the pinned memory; Bytes must not be used after.
func (h *HostBuffer) Free() error {
	h.Bytes = nil
	return h.dev.do("host free", func(d *driver) int32 { return d.cuMemFreeHost(h.p) })
}

// Stream is a CUDA stream of the device (cuBLAS runs its GEMMs on one, see BLAS.SetStream).
// Launch and the copies of this package use the default stream, which waits for it.
type Stream struct {
	dev *Device
	h   uintptr
}

// NewStream creates a blocking stream (ordered with the default stream).
func (dev *Device) NewStream() (*Stream, error) {
	s := &Stream{dev: dev}
	if err := dev.do("stream create", func(d *driver) int32 { return d.cuStreamCreate(&s.h, 0) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Destroy releases the stream after its queued work.
func (s *Stream) Destroy() error {
	return s.dev.do("stream destroy", func(d *driver) int32 { return d.cuStreamDestroy(s.h) })
}
