"""The CUDA path of the trainer ops: torch CUDA tensors in and out, used in place through their
device pointers, work queued on torch's current stream of their device with libneedle.so's
needle_cuda_* entry points (capi/needle.h). Nothing here waits for the device except the delta
encode, whose output size comes back to the host. NEVER RUN ON A GPU so far (docs/gpu.md "What has
never run on a GPU"); the GPU check runs tests/test_cuda.py there.
"""
import ctypes
import math

from . import _arrays
from ._native import ERR_LEN, lib

_LOGPROB = {"f32": lib.needle_cuda_logprob_f32, "f16": lib.needle_cuda_logprob_f16,
            "bf16": lib.needle_cuda_logprob_bf16}
_U32_MAX = (1 << 32) - 1
# Bytes of logits one chunk of linear_logprobs holds (tokens x vocab x element size).
_LINEAR_CHUNK_BYTES = 256 << 20


def _place(t):
    """(device ordinal, CUstream handle of torch's current stream there) of a CUDA tensor."""
    torch = _arrays.torch_module()
    index = t.device.index if t.device.index is not None else torch.cuda.current_device()
    return index, torch.cuda.current_stream(index).cuda_stream


def _check(rc, err, what):
    if rc < 0:
        raise RuntimeError(f"{what}: {err.value.decode()}")
    return rc


def logprobs(logits, labels, temperature, ignore_index, return_entropy):
    """logprobs_from_logits on CUDA tensors: float32 outputs on the logits' device."""
    torch = _arrays.torch_module()
    _, lshape, code, x = _arrays.float_tensor(logits, "logits")
    _, yshape, y = _arrays.int64_tensor(labels, "labels")
    if len(lshape) < 1 or tuple(lshape[:-1]) != tuple(yshape):
        raise ValueError(f"labels has shape {tuple(yshape)}; want logits' shape without its last "
                         f"dimension, {tuple(lshape[:-1])}")
    lp = torch.empty(yshape, dtype=torch.float32, device=x.device)
    ent = torch.empty_like(lp) if return_entropy else None
    _launch_logprob(code, x, math.prod(yshape), lshape[-1], y, temperature, ignore_index, lp, ent)
    return (lp, ent) if return_entropy else lp


def _launch_logprob(code, x, n, v, y, temperature, ignore_index, lp, ent):
    device, stream = _place(x)
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = _LOGPROB[code](x.data_ptr(), n, v, y.data_ptr(), temperature, ignore_index, lp.data_ptr(),
                        ent.data_ptr() if ent is not None else 0, 0, device, stream, err, ERR_LEN)
    _check(rc, err, "logprobs_from_logits on CUDA")


def linear_logprobs(hidden, weight, labels, temperature, ignore_index, return_entropy):
    """linear_logprobs on CUDA tensors: per chunk of tokens, the logits by torch's matmul (cuBLAS,
    in hidden's dtype, as the model computes them) into one reused buffer, then needle's kernel;
    [N, V] is never held. hidden and weight share a float dtype."""
    torch = _arrays.torch_module()
    _, hshape, code, h = _arrays.float_tensor(hidden, "hidden")
    _, wshape, wcode, w = _arrays.float_tensor(weight, "weight")
    _, yshape, y = _arrays.int64_tensor(labels, "labels")
    if wcode != code:
        raise TypeError(f"hidden is {hidden.dtype} but weight is {weight.dtype}: on CUDA they must match")
    if len(wshape) != 2 or len(hshape) < 1 or hshape[-1] != wshape[1] or tuple(hshape[:-1]) != tuple(yshape):
        raise ValueError(f"hidden {tuple(hshape)}, weight {tuple(wshape)}, labels {tuple(yshape)}: want "
                         f"[..., H], [V, H] and hidden's shape without its last dimension")
    n, v = math.prod(yshape), wshape[0]
    h, y = h.reshape(n, wshape[1]), y.reshape(n)
    lp = torch.empty(n, dtype=torch.float32, device=h.device)
    ent = torch.empty_like(lp) if return_entropy else None
    rows = max(1, min(n, _LINEAR_CHUNK_BYTES // (v * h.element_size())))
    chunk = torch.empty(rows, v, dtype=h.dtype, device=h.device)
    wt = w.t()
    for s in range(0, n, rows):
        c = min(rows, n - s)
        torch.matmul(h[s:s + c], wt, out=chunk[:c])
        _launch_logprob(code, chunk, c, v, y[s:s + c], temperature, ignore_index, lp[s:s + c],
                        ent[s:s + c] if ent is not None else None)
    lp = lp.reshape(yshape)
    return (lp, ent.reshape(yshape)) if return_entropy else lp


def delta_encode(new, o, w, delta_type):
    """The Delta of two CUDA tensors (new, and the Raw views o and w of old and new) with indices
    and values as CUDA tensors: uint32 indices (uint64 past 2^32 - 1 elements) and the new raw
    bits (uint16 or uint32). It waits for the stream once, to size them."""
    torch = _arrays.torch_module()
    device, stream = _place(new)
    n = o.size
    err = ctypes.create_string_buffer(ERR_LEN)
    work_bytes = lib.needle_cuda_delta_work_bytes(n)
    work = torch.empty(work_bytes, dtype=torch.uint8, device=new.device)
    nnz = _check(lib.needle_cuda_delta_count(o.ptr, w.ptr, n, o.itemsize, work.data_ptr(), work_bytes,
                                             device, stream, err, ERR_LEN), err, "delta_encode on CUDA")
    idx_size = 4 if n <= _U32_MAX else 8
    idx = torch.empty(nnz, dtype=torch.uint32 if idx_size == 4 else torch.uint64, device=work.device)
    vals = torch.empty(nnz, dtype=torch.uint16 if o.itemsize == 2 else torch.uint32, device=work.device)
    _check(lib.needle_cuda_delta_write(o.ptr, w.ptr, n, o.itemsize, work.data_ptr(), work_bytes,
                                       idx.data_ptr(), idx_size, vals.data_ptr(), device, stream, err,
                                       ERR_LEN), err, "delta_encode on CUDA")
    return delta_type(n, idx, vals)
