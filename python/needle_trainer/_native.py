"""Loads libneedle.so (the C ABI of capi/needle.h) and declares its functions for ctypes.

Where the library comes from, first found wins:
  1. the environment variable NEEDLE_LIB (a path to libneedle.so);
  2. libneedle.so beside this file (the needle_rl wheel installs it there);
  3. build/native/libneedle.so of the checkout this package sits in (PYTHONPATH=python, or
     `pip install -e ./python`);
  4. build/native/libneedle.so of the checkout `pip install ./python` was run from (recorded
     by setup.py in _checkout.py at install time).
No compiler is involved: `make native` builds the library.
"""
import ctypes
import os

ABI_VERSION = 2  # NEEDLE_ABI_VERSION of capi/needle.h this package was written against
ERR_LEN = 512

_vp, _i64, _i32, _f32, _u64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float, ctypes.c_uint64
_err = ctypes.c_char_p
_LOGPROB_ARGS = [_vp, _i64, _i64, _vp, _f32, _i64, _i32, _vp, _vp, _vp, _err, _i64]
# The CUDA entry points take device addresses (uint64), a device ordinal and a CUstream handle.
_CUDA_LOGPROB_ARGS = [_u64, _i64, _i64, _u64, _f32, _i64, _u64, _u64, _u64, _i32, _u64, _err, _i64]
_SIGNATURES = {
    "needle_abi_version": (_i32, []),
    "needle_simd_level": (_i32, [_err, _i64]),
    "needle_logprob_f32": (_i32, _LOGPROB_ARGS),
    "needle_logprob_f16": (_i32, _LOGPROB_ARGS),
    "needle_logprob_bf16": (_i32, _LOGPROB_ARGS),
    "needle_linear_logprob_f32": (_i32, [_vp, _i64, _i64, _vp, _i64, _vp, _f32, _i64, _vp, _vp,
                                         _vp, _err, _i64]),
    "needle_delta_encode": (_i64, [_vp, _vp, _i64, _i32, _vp, _i32, _vp, _err, _i64]),
    "needle_delta_apply": (_i32, [_vp, _i64, _i32, _vp, _i32, _vp, _i64, _err, _i64]),
    "needle_membw_read": (_i32, [_vp, _i64, ctypes.POINTER(ctypes.c_uint64), _err, _i64]),
    "needle_cuda_logprob_f32": (_i32, _CUDA_LOGPROB_ARGS),
    "needle_cuda_logprob_f16": (_i32, _CUDA_LOGPROB_ARGS),
    "needle_cuda_logprob_bf16": (_i32, _CUDA_LOGPROB_ARGS),
    "needle_cuda_delta_work_bytes": (_i64, [_i64]),
    "needle_cuda_delta_count": (_i64, [_u64, _u64, _i64, _i32, _u64, _i64, _i32, _u64, _err, _i64]),
    "needle_cuda_delta_write": (_i32, [_u64, _u64, _i64, _i32, _u64, _i64, _u64, _i32, _u64, _i32, _u64,
                                       _err, _i64]),
}


def _candidates():
    env = os.environ.get("NEEDLE_LIB")
    if env:
        return [("NEEDLE_LIB", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [("the wheel", os.path.join(here, "libneedle.so")),
           ("this checkout", os.path.join(here, "..", "..", "build", "native", "libneedle.so"))]
    try:
        from . import _checkout  # written by setup.py into installed copies only
        out.append(("the checkout pip installed from", _checkout.LIBNEEDLE))
    except ImportError:
        pass
    return out


def _load():
    tried = []
    for where, path in _candidates():
        if os.path.exists(path):
            lib = ctypes.CDLL(os.path.abspath(path))
            break
        tried.append(f"{path} ({where})")
    else:
        raise ImportError("libneedle.so not found; run `make native` in the needle checkout or set "
                          "NEEDLE_LIB to its path. Tried: " + "; ".join(tried))
    lib.needle_abi_version.restype = _i32  # first: an older library lacks newer functions
    if lib.needle_abi_version() != ABI_VERSION:
        raise ImportError(f"{lib._name} has C ABI version {lib.needle_abi_version()}, "
                          f"this package needs {ABI_VERSION}: rebuild with `make native`")
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


lib = _load()
PATH = lib._name


def simd_level():
    """The SIMD level libneedle.so runs at: "ref", "avx2", "avx512", "avx512vnni", "avx512bf16" or "amx"
    (NEEDLE_SIMD overrides; its trainer kernels run their AVX-512 code at the last three)."""
    buf = ctypes.create_string_buffer(ERR_LEN)
    if lib.needle_simd_level(buf, ERR_LEN) != 0:
        raise RuntimeError(buf.value.decode())
    return buf.value.decode()
