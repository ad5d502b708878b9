"""Delta weight transfer from a trainer's own process through libneedle.so (ctypes), checked
bit for bit against NumPy on the same buffers.

    python examples/delta_example.py [path/to/libneedle.so]   (default build/native/libneedle.so)

Encode finds the elements whose bits changed between two versions of a tensor (bf16 and fp32
here; NaN payloads and -0.0 count as changes), apply writes them into the old version.
The indices and values are exactly what AstraFlow's delta record carries after its
16-byte header struct.pack("<QHHi", nnz, elem_size, flags, 0).
"""
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "native", "libneedle.so")

lib = ctypes.CDLL(LIB)
vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
lib.needle_delta_encode.argtypes = [vp, vp, i64, i32, vp, i32, vp, ctypes.c_char_p, i64]
lib.needle_delta_encode.restype = i64
lib.needle_delta_apply.argtypes = [vp, i64, i32, vp, i32, vp, i64, ctypes.c_char_p, i64]
lib.needle_delta_apply.restype = i32


def ptr(a):
    return a.ctypes.data_as(vp)


def encode(old, new):
    """Changed indices (u32) and new values of two same-shaped integer views."""
    n, es = old.size, old.itemsize
    idx = np.empty(n, dtype=np.uint32)
    vals = np.empty(n, dtype=old.dtype)
    err = ctypes.create_string_buffer(256)
    nnz = lib.needle_delta_encode(ptr(old), ptr(new), n, es, ptr(idx), 4, ptr(vals), err, len(err))
    if nnz < 0:
        raise RuntimeError(err.value.decode())
    return idx[:nnz], vals[:nnz]


def apply(base, idx, vals):
    err = ctypes.create_string_buffer(256)
    rc = lib.needle_delta_apply(ptr(base), base.size, base.itemsize, ptr(idx), 4, ptr(vals), idx.size, err, len(err))
    if rc != 0:
        raise ValueError(err.value.decode())


def check(name, old, new):
    idx, vals = encode(old, new)
    want = np.nonzero(old != new)[0].astype(np.uint32)  # NumPy reference on the integer bits
    assert np.array_equal(idx, want), f"{name}: indices differ from NumPy"
    assert np.array_equal(vals, new[want]), f"{name}: values differ from NumPy"
    base = old.copy()
    apply(base, idx, vals)
    assert np.array_equal(base, new), f"{name}: applied tensor differs from new"
    print(f"ok {name}: {idx.size} of {old.size} elements changed, apply bit-exact")
    return idx, vals


rng = np.random.default_rng(0)

# bf16: a float32 weight update viewed as its top 16 bits (what torch.bfloat16 stores).
w = rng.standard_normal(1_000_003).astype(np.float32)
old16 = (w.view(np.uint32) >> 16).astype(np.uint16)
w2 = w - 1e-2 * w * (rng.random(w.size) < 0.01)
new16 = (w2.view(np.uint32) >> 16).astype(np.uint16)
new16[7] = 0x8000  # -0.0
old16[7] = 0x0000  # +0.0: equal as floats, different bits
check("bf16 1% update", old16, new16)

# fp32 with NaN payloads: same NaN-ness, different bits.
old32 = rng.standard_normal(4099).astype(np.float32).view(np.uint32)
new32 = old32.copy()
old32[[1, 2]] = [0x7FC00001, 0x7FC00000]
new32[[1, 2]] = [0x7FC00002, 0x7FC00000]
new32[4098] ^= 1
idx, _ = check("fp32 NaN payloads", old32, new32)
assert idx.tolist() == [1, 4098], idx

check("bf16 unchanged", old16, old16.copy())
check("fp32 all changed", old32, ~old32)
check("empty", np.empty(0, np.uint16), np.empty(0, np.uint16))

# A bad delta leaves the base untouched.
base = old16.copy()
try:
    apply(base, np.array([5, 3], dtype=np.uint32), np.array([1, 2], dtype=np.uint16))
    raise AssertionError("decreasing indices were accepted")
except ValueError as e:
    message = str(e)
assert "not greater" in message, message
assert np.array_equal(base, old16), "base changed after a rejected delta"
print("ok bad delta rejected, base untouched:", message)
