"""NumPy arrays and torch tensors as the raw buffers libneedle.so reads and writes.

torch is never imported here: a tensor can only come from a program that imported it already
(sys.modules). CPU buffers are used in place through their data pointers; a non-contiguous
input is made contiguous first (one copy, as torch's own ops do).
"""
import ctypes
import sys

import numpy as np


class GPUNotBuiltError(NotImplementedError):
    """A CUDA tensor reached a function that has no GPU path (delta_apply)."""


def torch_module():
    return sys.modules.get("torch")


def is_torch(x):
    t = torch_module()
    return t is not None and isinstance(x, t.Tensor)


def on_cuda(**named):
    """Whether the tensors among named sit on a CUDA device (False: all on the CPU; NumPy arrays
    count as CPU). Raises ValueError when they sit on different devices, or on a device that is
    neither the CPU nor CUDA."""
    if all(x is None or isinstance(x, np.ndarray) or (is_torch(x) and x.is_cpu)
           for x in named.values()):
        return False  # all on the CPU (the common case: no device objects built)
    # torch.device objects compare cheaply; strings are built for messages only.
    devices = [(name, x.device if is_torch(x) else None) for name, x in named.items()
               if x is not None]
    first, first_dev = devices[0]
    for name, dev in devices[1:]:
        if dev != first_dev:
            raise ValueError(f"{name} is on {dev or 'cpu'} but {first} is on {first_dev or 'cpu'}: "
                             "all inputs must be on one device")
    if first_dev is None:
        return False  # not tensors: the type checks that follow name them
    if first_dev.type != "cuda":
        raise ValueError(f"{first} is on {first_dev}: needle_trainer runs on CPU and CUDA tensors")
    return True


def _plain(x):
    """x outside autograd (detach costs a microsecond: only when x requires grad)."""
    return x.detach() if x.requires_grad else x


def _not_a_tensor(x, name):
    return TypeError(f"{name} must be a NumPy array or a torch tensor, got {type(x).__name__}")


# Float dtypes: NumPy's float32/float16 (looked up by dtype: a dtype's name costs microseconds),
# then by name ml_dtypes' bfloat16 and torch's three.
_NP_FLOATS = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
_FLOATS = {"bfloat16": "bf16", "torch.float32": "f32", "torch.float16": "f16",
           "torch.bfloat16": "bf16"}
_BITS = {"bfloat16": "bf16", "bf16": "bf16", "float16": "f16", "f16": "f16"}


def float_tensor(x, name, bits=None):
    """(pointer, shape, dtype code "f32"|"f16"|"bf16", owner) of a float input. A NumPy uint16
    array holds bf16 or fp16 bits when bits names which ("bfloat16" or "float16")."""
    if not isinstance(x, np.ndarray):
        if not is_torch(x):
            raise _not_a_tensor(x, name)
        code = _FLOATS.get(str(x.dtype))
        if code is None:
            raise TypeError(f"{name} has dtype {x.dtype}; want float32, float16 or bfloat16")
        x = _plain(x).contiguous()
        return x.data_ptr(), tuple(x.shape), code, x
    if x.dtype == np.uint16 and bits is not None:
        code = _BITS.get(bits)
        if code is None:
            raise ValueError(f"bits={bits!r}: want 'bfloat16' or 'float16' for the uint16 {name}")
    else:
        code = _NP_FLOATS.get(x.dtype) or _FLOATS.get(x.dtype.name)
        if code is None:
            hint = " (pass bits='bfloat16' or 'float16' for raw 16-bit patterns)" if x.dtype == np.uint16 else ""
            raise TypeError(f"{name} has dtype {x.dtype}; want float32, float16 or bfloat16{hint}")
    x = np.ascontiguousarray(x)
    return address(x), x.shape, code, x


def int64_tensor(x, name):
    """(pointer, shape, owner) of an integer input as contiguous int64 (converted if needed)."""
    if not isinstance(x, np.ndarray):
        if not is_torch(x):
            raise _not_a_tensor(x, name)
        t = torch_module()
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == t.bool:
            raise TypeError(f"{name} has dtype {x.dtype}; want an integer dtype (int64)")
        x = _plain(x)
        if x.dtype != t.int64:
            x = x.to(t.int64)
        x = x.contiguous()
        return x.data_ptr(), tuple(x.shape), x
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} has dtype {x.dtype}; want an integer dtype (int64)")
    x = np.ascontiguousarray(x, dtype=np.int64)
    return address(x), x.shape, x


def address(a):
    """The data pointer of a contiguous NumPy array. Through the buffer protocol when a is
    writable (a fraction of a microsecond; a.ctypes.data costs a few), else its interface."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty
        return a.__array_interface__["data"][0]


class Raw:
    """A tensor's memory as the delta kernels see it: pointer, element count and size, and
    whether it may be written."""
    __slots__ = ("ptr", "size", "itemsize", "writable")

    def __init__(self, ptr, size, itemsize, writable):
        self.ptr, self.size, self.itemsize, self.writable = ptr, size, itemsize, writable

    @property
    def bits_dtype(self):
        """The NumPy integer type of one element's bits."""
        return np.uint16 if self.itemsize == 2 else np.uint32


def raw(x, name):
    """Raw of a contiguous tensor with 2- or 4-byte elements (deltas compare bits). A torch
    CPU tensor is read through its data pointer (no NumPy view: that costs microseconds)."""
    if isinstance(x, np.ndarray):
        size, itemsize, contiguous = x.size, x.itemsize, x.flags.c_contiguous
        dtype = getattr(x, "st_dtype", x.dtype)  # a safetensors file's tensor: the file's name
    elif is_torch(x):
        size, itemsize, contiguous, dtype = x.numel(), x.element_size(), x.is_contiguous(), x.dtype
    else:
        raise _not_a_tensor(x, name)
    if itemsize not in (2, 4):
        raise TypeError(f"{name} has dtype {dtype} ({itemsize}-byte elements); deltas are "
                        "for 2-byte (bf16, fp16) or 4-byte (fp32) elements")
    if not contiguous:
        raise ValueError(f"{name} is not contiguous; deltas need the tensor's own memory")
    if isinstance(x, np.ndarray):
        return Raw(address(x), size, itemsize, x.flags.writeable)
    return Raw(x.data_ptr(), size, itemsize, True)


def like(x, array):
    """array (NumPy, CPU) as a torch tensor when x is one (sharing memory), else as is."""
    return array if isinstance(x, np.ndarray) else torch_module().from_numpy(array)
