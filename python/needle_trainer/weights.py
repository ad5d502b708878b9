"""Publishing a trainer's weights to a `needle weights send` daemon on the same host.

publish(tensors) lays the tensors out as a safetensors file in the sender's shared-memory
double buffer (the half not being served), copies their bytes there and commits: the sender
acks at once and encodes the delta from the previous version in the background while
receivers pull. The copy (pwrite from each tensor's buffer) is this process's only cost.

Protocol: JSON lines over the sender's unix socket (weights/sender/control.go).
"""
import ctypes
import json
import os
import socket

import numpy as np

from ._arrays import address, is_torch

# safetensors dtype names by NumPy dtype name and by torch dtype string.
_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64", "int64": "I64",
           "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def _safetensors_dtype(x, name):
    key = str(x.dtype).removeprefix("torch.") if is_torch(x) else x.dtype.name
    code = _DTYPES.get(key)
    if code is None:
        raise TypeError(f"{name} has dtype {x.dtype}; publish takes {', '.join(sorted(_DTYPES))}")
    return code


def _host(x, name):
    """(pointer, byte count, owner) of x's bytes on the host, contiguous. A torch tensor on a
    GPU is copied down first; NumPy arrays and CPU tensors are read in place."""
    if is_torch(x):
        x = x.detach()
        if not x.is_cpu:
            x = x.to("cpu")
        x = x.contiguous()
        return x.data_ptr(), x.numel() * x.element_size(), x
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array or a torch tensor, got {type(x).__name__}")
    x = np.ascontiguousarray(x)
    return address(x), x.nbytes, x


class Publisher:
    """A connection to the sender whose folder is dir (the sender's --dir). One publish at a
    time; closing the connection in the middle of one aborts it."""

    def __init__(self, dir="/dev/shm/needle-weights"):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(os.path.join(dir, "control.sock"))
        except OSError as e:
            self._sock.close()
            raise ConnectionError(f"no needle weights sender at {dir}: {e}") from e
        self._reader = self._sock.makefile("rb")

    def close(self):
        self._reader.close()
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, **request):
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        line = self._reader.readline()
        if not line:
            raise ConnectionError("the sender closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"needle weights sender: {reply.get('error')}")
        return reply

    def publish(self, tensors, version=0, metadata=None):
        """Publishes tensors (a dict name -> torch tensor or NumPy array; bf16, fp16, fp32 and
        the integer dtypes) as version (0: the newest + 1) and returns the version number once
        the sender has it: receivers can pull it in full at once, the delta follows."""
        items = list(tensors.items())
        meta = {"format": "pt"} if metadata is None else dict(metadata)
        header = [{"name": n, "dtype": _safetensors_dtype(x, n), "shape": list(x.shape)} for n, x in items]
        slot = self._call(op="begin", version=version, tensors=header, metadata=meta)["slot"]
        try:
            self._fill(slot, items)
        except BaseException:
            self._call(op="abort")
            raise
        return self._call(op="commit")["version"]

    @staticmethod
    def _fill(slot, items):
        """Writes each tensor's bytes at its offset with pwrite, straight from the tensor's own
        buffer: a fresh shared-memory page is filled once, where a copy through a mapping faults
        it in zeroed first (the sender's own publish, sender.Write, does the same)."""
        fd = os.open(slot["path"], os.O_WRONLY)
        try:
            for (name, x), (begin, end) in zip(items, slot["offsets"]):
                ptr, n, owner = _host(x, name)
                if n != end - begin:
                    raise ValueError(f"{name}: {n} bytes, its slot has {end - begin}")
                if n == 0:
                    continue
                view = memoryview((ctypes.c_char * n).from_address(ptr)).cast("B")
                done = 0
                while done < n:  # Linux writes at most ~2 GiB per call
                    done += os.pwrite(fd, view[done:], begin + done)
                del view, owner
        finally:
            os.close(fd)

    def wait(self, version):
        """The stats of version's background encode job, once it has finished (dict)."""
        return self._call(op="wait", version=version)["stats"]


def publish(tensors, dir="/dev/shm/needle-weights", version=0, metadata=None):
    """Publishes tensors through a connection of its own (see Publisher.publish)."""
    with Publisher(dir) as p:
        return p.publish(tensors, version=version, metadata=metadata)
