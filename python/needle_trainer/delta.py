"""Weight deltas on libneedle.so's C kernels (kernels/trainer/delta): which elements of a
tensor changed bits between two versions, with their new bits (encode), written into the old
version in place (apply). Elements are compared as raw bits (NaN payloads and -0.0 count as
changes), so apply reproduces the new tensor bit for bit. 2-byte (bf16, fp16) and 4-byte
(fp32) elements; indices are u32, or u64 past 2^32 - 1 elements (AstraFlow's rule).

Each function takes a pair of tensors (NumPy arrays or torch CPU tensors), a pair of state
dicts (name -> tensor), or a pair of safetensors file paths (read through mmap). delta_encode
also takes torch CUDA tensors (encoded on their device, the Delta's arrays are CUDA tensors);
delta_apply runs on the CPU only."""
import ctypes
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import _arrays, _cuda
from ._native import ERR_LEN, lib

_U32_MAX = (1 << 32) - 1


@dataclass
class Delta:
    """The changed elements of one tensor of numel elements: strictly increasing indices
    (uint32, or uint64 when numel > 2^32 - 1) and the new raw bits of those elements (uint16
    for bf16/fp16, uint32 for fp32). Exactly the payload of an AstraFlow delta record. NumPy
    arrays, or torch CUDA tensors of those dtypes when encoded from CUDA tensors."""
    numel: int
    indices: np.ndarray
    values: np.ndarray


def _is_path(x):
    return isinstance(x, (str, os.PathLike))


def delta_encode(old, new):
    """The Delta from old to new: for two tensors a Delta; for two state dicts or two
    safetensors paths, {name: Delta} for every tensor of new (each must be in old with the
    same dtype and shape; whole checkpoints whose tensors come and go: `needle delta encode`)."""
    if _is_path(old) and _is_path(new):
        (old_t, _), (new_t, _) = _read_safetensors(old, "r"), _read_safetensors(new, "r")
        return {name: _encode_one(old_t.get(name), t, name) for name, t in new_t.items()}
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return {name: _encode_one(old.get(name), t, name) for name, t in new.items()}
    return _encode_one(old, new, None)


def delta_apply(base, delta):
    """Writes delta into base in place: a Delta into a tensor, or {name: Delta} into a state
    dict or a safetensors file (patched in place through mmap). Each tensor is checked before
    it is written (sizes, indices strictly increasing and in range): on an error that tensor
    is untouched; with several tensors, every name and size is checked before the first write."""
    if isinstance(delta, Delta):
        _apply_one(base, delta, "base")
        return base
    if not isinstance(delta, Mapping):
        raise TypeError(f"delta must be a Delta or a dict of them, got {type(delta).__name__}")
    tensors, data = _read_safetensors(base, "r+") if _is_path(base) else (base, None)
    if not isinstance(tensors, Mapping):
        raise TypeError(f"base must be a state dict or a safetensors path for a dict of deltas, "
                        f"got {type(base).__name__}")
    for name, d in delta.items():
        if name not in tensors:
            raise KeyError(f"delta has tensor {name!r} that base lacks")
        _check_sizes(tensors[name], d, f"base[{name!r}]")
    for name, d in delta.items():
        _apply_one(tensors[name], d, f"base[{name!r}]")
    if data is not None:
        data.flush()
    return base


def _encode_one(old, new, name):
    o_name, n_name = ("old", "new") if name is None else (f"old[{name!r}]", f"new[{name!r}]")
    if old is None:
        raise KeyError(f"{n_name} has no tensor of that name in old; deltas need both versions")
    cuda = _arrays.on_cuda(**{o_name: old, n_name: new})
    o, w = _arrays.raw(old, o_name), _arrays.raw(new, n_name)
    if (old.dtype != new.dtype or old.shape != new.shape
            or getattr(old, "st_dtype", None) != getattr(new, "st_dtype", None)):
        raise ValueError(f"{n_name} is {_dtype(new)} {tuple(new.shape)} but {o_name} is "
                         f"{_dtype(old)} {tuple(old.shape)}: a delta needs the same dtype and shape")
    if cuda:
        return _cuda.delta_encode(new, o, w, Delta)
    n = o.size
    idx = np.empty(n, np.uint32 if n <= _U32_MAX else np.uint64)
    vals = np.empty(n, o.bits_dtype)  # room for every element
    err = ctypes.create_string_buffer(ERR_LEN)
    nnz = lib.needle_delta_encode(o.ptr, w.ptr, n, o.itemsize,
                                  _arrays.address(idx), idx.itemsize, _arrays.address(vals), err,
                                  ERR_LEN)
    if nnz < 0:
        raise ValueError(f"{n_name}: {err.value.decode()}")
    # Views, not copies: the pages past the few scratch entries after nnz were never touched, so
    # they hold no memory (only address space), and a copy would cost as much as the encode's
    # own writes.
    return Delta(n, idx[:nnz], vals[:nnz])


def _dtype(x):
    return getattr(x, "st_dtype", None) or str(x.dtype).replace("torch.", "")


def _check_sizes(base, d, name):
    b = _arrays.raw(base, name)
    if not isinstance(d, Delta):
        raise TypeError(f"delta for {name} must be a Delta, got {type(d).__name__}")
    if b.size != d.numel or b.itemsize != d.values.itemsize:
        raise ValueError(f"{name} has {b.size} elements of {b.itemsize} bytes; the delta is for "
                         f"{d.numel} elements of {d.values.itemsize} bytes")
    if d.indices.dtype not in (np.uint32, np.uint64) or d.indices.size != d.values.size:
        raise ValueError(f"delta for {name}: want uint32/uint64 indices, one per value; got "
                         f"{d.indices.size} {d.indices.dtype} indices for {d.values.size} values")
    return b


def _apply_one(base, d, name):
    if _arrays.on_cuda(**{name: base}):
        raise _arrays.GPUNotBuiltError(f"{name} is on {base.device}: delta_apply runs on the CPU only "
                                       "(on the device its indices would have to be checked there first); "
                                       "apply to a CPU copy, or use `needle delta apply`")
    b = _check_sizes(base, d, name)
    if not b.writable:
        raise ValueError(f"{name} is read-only; delta_apply writes into it")
    idx, vals = np.ascontiguousarray(d.indices), np.ascontiguousarray(d.values)
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = lib.needle_delta_apply(b.ptr, b.size, b.itemsize, _arrays.address(idx),
                                idx.itemsize, _arrays.address(vals), vals.size, err, ERR_LEN)
    if rc != 0:
        raise ValueError(f"delta for {name}: {err.value.decode()}")


# Bytes per element of the safetensors dtypes.
_ST_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "BF16": 2, "F16": 2,
             "I16": 2, "U16": 2, "F32": 4, "I32": 4, "U32": 4, "F64": 8, "I64": 8, "U64": 8}
_ST_VIEWS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class _FileTensor(np.ndarray):
    """A raw-bits view of one tensor of a safetensors file that reports the file's dtype name,
    so tensors of different dtypes but the same width (BF16 vs F16) never pair up."""


def _read_safetensors(path, mode):
    """({name: raw-bits view of the tensor}, the file's memmap) of a safetensors file."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        hlen = int.from_bytes(head, "little")
        if hlen > os.path.getsize(path) - 8:
            raise ValueError(f"{path}: header length {hlen} runs past the end of the file")
        try:
            header = json.loads(f.read(hlen))
        except ValueError as e:
            raise ValueError(f"{path}: bad safetensors header: {e}") from None
    data = np.memmap(path, np.uint8, mode)
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        size = _ST_SIZES.get(e.get("dtype"))
        if size is None:
            raise ValueError(f"{path}: tensor {name!r} has unknown dtype {e.get('dtype')!r}")
        lo, hi = e["data_offsets"]
        lo, hi = 8 + hlen + lo, 8 + hlen + hi
        if not (8 + hlen <= lo <= hi <= data.size) or (hi - lo) % size:
            raise ValueError(f"{path}: tensor {name!r} has bad data offsets {e['data_offsets']}")
        t = data[lo:hi].view(_ST_VIEWS[size]).reshape(e["shape"]).view(_FileTensor)
        t.st_dtype = e["dtype"]
        out[name] = t
    return out, data
