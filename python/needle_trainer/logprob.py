"""Token log-probabilities with verl's semantics (logprobs_from_logits, entropy_from_logits) on
libneedle.so's C kernels (kernels/trainer/logprob): one pass over each row, fp32 math, fp32
outputs. See capi/needle.h for the exact definitions (NaN and inf rows included)."""
import ctypes
import math

import numpy as np

from . import _arrays, _cuda
from ._native import ERR_LEN, lib

_LOGPROB = {"f32": lib.needle_logprob_f32, "f16": lib.needle_logprob_f16,
            "bf16": lib.needle_logprob_bf16}


def _check_call(rc, err):
    if rc != 0:
        raise ValueError(err.value.decode())


def _outputs(n, want_entropy):
    lp = np.empty(n, np.float32)
    ent = np.empty(n, np.float32) if want_entropy else None
    return lp, ent


def _finish(like, lp, ent, shape, return_entropy):
    lp = _arrays.like(like, lp.reshape(shape))
    if not return_entropy:
        return lp
    return lp, _arrays.like(like, ent.reshape(shape))


def _scalars(temperature, ignore_index, threads):
    """The scalar arguments as the C types take them (ctypes would wrap an int that does not fit)."""
    try:
        t, ig, th = float(temperature), int(ignore_index), int(threads)
    except (TypeError, ValueError) as e:
        raise TypeError(f"temperature, ignore_index and threads must be numbers: {e}") from None
    if not -(1 << 63) <= ig < 1 << 63:
        raise ValueError(f"ignore_index {ig} does not fit int64")
    return t, ig, max(1, min(th, 1 << 16))


def logprobs_from_logits(logits, labels, temperature=1.0, ignore_index=-100,
                         return_entropy=False, threads=1, bits=None):
    """log softmax(logits / temperature)[labels] per position, as verl's logprobs_from_logits.

    logits: [..., V] float32, float16 or bfloat16 (torch tensor, or NumPy array; a NumPy
    uint16 array holds raw bf16/fp16 bits when bits="bfloat16"/"float16"). labels: [...]
    integers; positions whose label is ignore_index get 0. Returns float32 [...] (a torch
    tensor when logits is one), and with return_entropy=True also the entropy
    lse - sum(softmax * y) of y = logits / temperature. threads: CPU threads over the rows
    (at most 256 are used).
    CUDA tensors: computed on their device, queued on torch's current stream (threads unused;
    a label outside [0, V) that is not ignore_index gives NaN there instead of an error).
    """
    if _arrays.on_cuda(logits=logits, labels=labels):
        t, ig, _ = _scalars(temperature, ignore_index, threads)
        return _cuda.logprobs(logits, labels, t, ig, return_entropy)
    lptr, lshape, code, lkeep = _arrays.float_tensor(logits, "logits", bits)
    yptr, yshape, ykeep = _arrays.int64_tensor(labels, "labels")
    if len(lshape) < 1 or tuple(lshape[:-1]) != tuple(yshape):
        raise ValueError(f"labels has shape {tuple(yshape)}; want logits' shape without its last "
                         f"dimension, {tuple(lshape[:-1])}")
    t, ig, th = _scalars(temperature, ignore_index, threads)
    v = lshape[-1]
    n = math.prod(yshape)
    lp, ent = _outputs(n, return_entropy)
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = _LOGPROB[code](lptr, n, v, yptr, t, ig, th, _arrays.address(lp),
                        _arrays.address(ent) if ent is not None else None, None, err, ERR_LEN)
    _check_call(rc, err)
    return _finish(logits, lp, ent, yshape, return_entropy)


def linear_logprobs(hidden, weight, labels, temperature=1.0, ignore_index=-100,
                    return_entropy=False):
    """logprobs_from_logits(hidden @ weight.T, labels, ...) without ever holding the logits.

    hidden: [..., H], weight: [V, H] (the lm_head), labels: [...]. The C kernel is fp32
    (needle's batch-invariant dot products, no BLAS, over chunks of 8 to 256 rows x 1024 vocab,
    folded online): float16/bfloat16 hidden or weight are converted to a float32 copy first
    (the weight copy is V x H x 4 bytes). The chunks run on OpenMP's threads (OMP_NUM_THREADS).
    CUDA tensors (hidden and weight of one dtype): per chunk of tokens (256 MiB of logits), the
    logits by torch's matmul in that dtype, as the model computes them, then needle's kernel.
    """
    if _arrays.on_cuda(hidden=hidden, weight=weight, labels=labels):
        t, ig, _ = _scalars(temperature, ignore_index, 1)
        return _cuda.linear_logprobs(hidden, weight, labels, t, ig, return_entropy)
    hptr, hshape, hkeep = _fp32(hidden, "hidden")
    wptr, wshape, wkeep = _fp32(weight, "weight")
    yptr, yshape, ykeep = _arrays.int64_tensor(labels, "labels")
    if len(wshape) != 2:
        raise ValueError(f"weight has shape {tuple(wshape)}; want [vocab, hidden]")
    if len(hshape) < 1 or hshape[-1] != wshape[1]:
        raise ValueError(f"hidden has shape {tuple(hshape)}; want [..., {wshape[1]}] "
                         f"(weight's hidden size)")
    if tuple(hshape[:-1]) != tuple(yshape):
        raise ValueError(f"labels has shape {tuple(yshape)}; want hidden's shape without its "
                         f"last dimension, {tuple(hshape[:-1])}")
    t, ig, _ = _scalars(temperature, ignore_index, 1)
    n = math.prod(yshape)
    lp, ent = _outputs(n, return_entropy)
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = lib.needle_linear_logprob_f32(hptr, n, hshape[-1], wptr, wshape[0], yptr, t, ig,
                                       _arrays.address(lp),
                                       _arrays.address(ent) if ent is not None else None,
                                       None, err, ERR_LEN)
    _check_call(rc, err)
    return _finish(hidden, lp, ent, yshape, return_entropy)


def _fp32(x, name):
    """(pointer, shape, owner) of x as contiguous float32 (a copy unless it is one already)."""
    ptr, shape, code, keep = _arrays.float_tensor(x, name)
    if code == "f32":
        return ptr, shape, keep
    if _arrays.is_torch(keep):
        keep = keep.float()
        return keep.data_ptr(), shape, keep
    keep = keep.astype(np.float32)
    return _arrays.address(keep), shape, keep
