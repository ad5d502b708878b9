//go:build wheel

package faissgo

// The wheel's build (make dist, tools/wheel): FAISS and its C API compiled statically by zig's
// clang (tools/faiss.sh wheel), scipy-openblas32 and LLVM's libomp bundled beside the binary; the directories come from
// CGO_CFLAGS/CGO_LDFLAGS (tools/wheel/dist.sh), libc++ is linked statically by zig c++.

/*
#cgo LDFLAGS: -lfaiss_c -lfaiss -lscipy_openblas -lomp -lm
*/
import "C"
