"""Recompute token log-probs in a trainer's own Python process through libneedle.so (ctypes).

    python examples/logprob_ctypes.py [path/to/libneedle.so]

Builds bf16 / fp16 / fp32 logits [N, V] and int64 labels with NumPy, calls
needle_logprob_<dtype> on those very buffers (no copy), and compares logprob / entropy / logsumexp
with a NumPy float64 reference (verl semantics: logits / temperature, ignore_index -100 ->
logprob 0). Also calls the fused needle_linear_logprob_f32 and shows the error message of a bad
label. Prints one JSON line with the largest relative errors; exits 1 if any exceeds 1e-5.
examples/logprob_example_test.go runs it in `make test`.
"""
import ctypes
import json
import os
import sys

import numpy as np

LIB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "build", "native", "libneedle.so")
lib = ctypes.CDLL(LIB)

f32p = ctypes.POINTER(ctypes.c_float)
i64p = ctypes.POINTER(ctypes.c_int64)
u16p = ctypes.POINTER(ctypes.c_uint16)
for name, elem in (("needle_logprob_bf16", u16p), ("needle_logprob_f16", u16p),
                   ("needle_logprob_f32", f32p)):
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int32
    fn.argtypes = [elem, ctypes.c_int64, ctypes.c_int64, i64p, ctypes.c_float, ctypes.c_int64,
                   ctypes.c_int32, f32p, f32p, f32p, ctypes.c_char_p, ctypes.c_int64]
lib.needle_linear_logprob_f32.restype = ctypes.c_int32
lib.needle_linear_logprob_f32.argtypes = [f32p, ctypes.c_int64, ctypes.c_int64, f32p,
                                          ctypes.c_int64, i64p, ctypes.c_float, ctypes.c_int64,
                                          f32p, f32p, f32p, ctypes.c_char_p, ctypes.c_int64]


def ptr(a, t):
    assert a.flags["C_CONTIGUOUS"]
    return a.ctypes.data_as(t)


def reference(logits, labels, temperature, ignore_index=-100):
    """verl's logprobs_from_logits / entropy_from_logits in float64."""
    y = logits.astype(np.float64) / temperature
    m = y.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(y - m).sum(axis=1, keepdims=True)))[:, 0]
    p = np.exp(y - lse[:, None])
    entropy = lse - (p * y).sum(axis=1)
    safe = np.where(labels == ignore_index, 0, labels)
    logprob = np.where(labels == ignore_index, 0.0, y[np.arange(len(y)), safe] - lse)
    return logprob, entropy, lse


def max_rel(got, want):
    return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))) if len(want) else 0.0


def encode(x32, dtype):
    """The buffer handed to libneedle and the float values it holds, for one dtype."""
    if dtype == "bf16":
        bits = (x32.view(np.uint32) >> 16).astype(np.uint16)  # truncate to bf16 bits
        return bits, (bits.astype(np.uint32) << 16).view(np.float32), lib.needle_logprob_bf16, u16p
    if dtype == "f16":
        h = x32.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float32), lib.needle_logprob_f16, u16p
    return x32, x32, lib.needle_logprob_f32, f32p


def run_logits(dtype, n, v, temperature, threads, rng):
    x32 = (rng.standard_normal((n, v)) * 3).astype(np.float32)
    buf, x, fn, elem = encode(x32, dtype)
    labels = rng.integers(0, v, n).astype(np.int64)
    labels[::4] = -100
    out = np.zeros((3, n), np.float32)
    err = ctypes.create_string_buffer(256)
    rc = fn(ptr(buf, elem), n, v, ptr(labels, i64p), temperature, -100, threads,
            ptr(out[0], f32p), ptr(out[1], f32p), ptr(out[2], f32p), err, len(err))
    if rc != 0:
        raise RuntimeError(err.value.decode())
    want = reference(x, labels, temperature)
    return [max_rel(out[k], want[k]) for k in range(3)]


def run_linear(n, h, v, rng):
    hidden = rng.standard_normal((n, h)).astype(np.float32)
    w = (rng.standard_normal((v, h)) / np.sqrt(h)).astype(np.float32)
    labels = rng.integers(0, v, n).astype(np.int64)
    out = np.zeros((3, n), np.float32)
    err = ctypes.create_string_buffer(256)
    rc = lib.needle_linear_logprob_f32(ptr(hidden, f32p), n, h, ptr(w, f32p), v, ptr(labels, i64p),
                                       1.0, -100, ptr(out[0], f32p), ptr(out[1], f32p),
                                       ptr(out[2], f32p), err, len(err))
    if rc != 0:
        raise RuntimeError(err.value.decode())
    logits = hidden.astype(np.float64) @ w.astype(np.float64).T
    want = reference(logits, labels, 1.0)
    return [max_rel(out[k], want[k]) for k in range(3)]


def bad_label_message():
    logits = np.zeros((2, 5), np.uint16)
    labels = np.array([1, 5], np.int64)
    out = np.zeros(2, np.float32)
    err = ctypes.create_string_buffer(256)
    rc = lib.needle_logprob_bf16(ptr(logits, u16p), 2, 5, ptr(labels, i64p), 1.0, -100, 1,
                                 ptr(out, f32p), None, None, err, len(err))
    return rc, err.value.decode()


def main():
    rng = np.random.default_rng(0)
    result = {"cases": {}}
    for name, args in {"bf16 7x1001 T=1": ("bf16", 7, 1001, 1.0, 1),
                       "bf16 33x152064 T=0.7 threads=2": ("bf16", 33, 152064, 0.7, 2),
                       "f16 5x3000 T=1.3": ("f16", 5, 3000, 1.3, 1),
                       "f32 9x777 T=1 threads=3": ("f32", 9, 777, 1.0, 3)}.items():
        result["cases"][name] = run_logits(*args, rng)
    result["cases"]["linear 300x64x5000"] = run_linear(300, 64, 5000, rng)
    rc, msg = bad_label_message()
    result["bad_label"] = {"status": rc, "error": msg}
    worst = max(max(errs) for errs in result["cases"].values())
    result["max_rel_err"] = worst
    print(json.dumps(result))
    return 0 if worst <= 1e-5 and rc == -1 else 1


if __name__ == "__main__":
    sys.exit(main())
