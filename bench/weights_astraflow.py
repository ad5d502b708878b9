"""AstraFlow's delta algorithm in NumPy (docs/en/architecture/delta-weight-transfer.md in
Infini-AI-Lab/astraflow), the baseline of `needle bench weights`, on the benchmark's own files:

    python bench/weights_astraflow.py --old HALF1 --new HALF2 --base SCRATCH --header N

The data sections of two safetensors files (bf16 weights) are compared as uint16: `new != old`,
`np.where`, u32 indices (u64 past 2^32 elements) and the new raw values, after a 16-byte header
{u64 nnz, u16 elem_size, u16 flags, i32 reserved}; apply is NumPy's scatter `base[idx] = vals` into
SCRATCH (a copy of OLD the benchmark wrote), checked against NEW. Best of 3 runs after a warm-up,
one thread (NumPy's). Prints one JSON line.

--astraflow CHECKOUT (by hand; a checkout of Infini-AI-Lab/astraflow, never committed; its sender
imports torch and pyzmq): encode is AstraFlow's own TransferAgent._compute_delta instead, unmodified,
on one buffer holding both halves as its sender's shared memory does (old in half 0, new in half 1),
called on an agent made without its services (no __init__: only the buffers and locks the method
reads). Its time is the method's own (`_delta_compute_time`, best of 3 after a warm-up); the records
it wrote are checked against the NumPy encode's. Apply is AstraFlow's too: RaaSWeightReceiver.
apply_delta_and_save, unmodified, what its RaaS manager calls for each delta (the scatter into the
receiver's in-RAM copy of the weights, then the whole file written afresh and renamed), on a receiver
made without its services holding OLD; and apply_delta_worker.apply_delta, its subprocess variant
(the scatter into the mapped file), on SCRATCH. Both are timed as called (best of 3 after a warm-up)
and their files checked against NEW; the first is the apply the benchmark compares with.
"""
import argparse
import json
import mmap
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import types

import numpy as np


def best(fn, repeats=3):
    fn()
    t = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - start)
    return t


def bare_packages(checkout):
    """AstraFlow's package __init__ files import the whole dataflow stack (torchdata, ...): its
    parent packages are made bare, the modules timed here load as they ship."""
    for name in ("astraflow", "astraflow.core", "astraflow.core.weight_manager", "astraflow.raas",
                 "astraflow.raas.server"):
        pkg = types.ModuleType(name)
        pkg.__path__ = [os.path.join(checkout, *name.split("."))]
        sys.modules[name] = pkg


def astraflow_encode(checkout, old, new, idx, vals):
    """Times AstraFlow's TransferAgent._compute_delta on old -> new; checks its records."""
    bare_packages(checkout)
    from astraflow.core.weight_manager.transfer.sender_agent import TransferAgent

    n = old.nbytes
    agent = TransferAgent.__new__(TransferAgent)
    agent.mmap_buffer = mmap.mmap(-1, 2 * n)
    agent.mmap_buffer[:n] = old.tobytes()
    agent.mmap_buffer[n:] = new.tobytes()
    agent._single_buffer_length = n
    agent._delta_mmap = mmap.mmap(-1, 16 + 6 * idx.size + (1 << 20))
    agent._delta_mmap_lock, agent._delta_lock = threading.Lock(), threading.Lock()
    t = float("inf")
    for _ in range(4):  # a warm-up, then the best of 3
        agent._delta_ready = False
        agent._compute_delta(2, 1)
        assert agent._delta_ready, "AstraFlow's _compute_delta failed (its log says why)"
        t = min(t, agent._delta_compute_time)
    nnz, = struct.unpack_from("<Q", agent._delta_mmap, 0)
    got = np.frombuffer(agent._delta_mmap, dtype=idx.dtype, count=nnz, offset=16)
    got_vals = np.frombuffer(agent._delta_mmap, dtype=np.uint16, count=nnz, offset=16 + idx.nbytes)
    assert nnz == idx.size and np.array_equal(got, idx) and np.array_equal(got_vals, vals), \
        "AstraFlow's records differ from the NumPy encode's"
    return t


def astraflow_apply(checkout, a, idx, vals):
    """Times AstraFlow's two applies of the delta idx, vals (see above); returns their seconds."""
    bare_packages(checkout)
    from astraflow.raas.server.apply_delta_worker import apply_delta
    from astraflow.raas.server.tcp_receiver import RaaSWeightReceiver

    flags = 1 if idx.dtype == np.uint64 else 0
    delta = struct.pack("<QHHi", idx.size, 2, flags, 0) + idx.tobytes() + vals.tobytes()
    work = tempfile.mkdtemp(prefix="astraflow-apply-", dir=os.path.dirname(os.path.abspath(a.base)))
    try:
        with open(a.old, "rb") as f:
            header = f.read(a.header)
            data = bytearray(f.read())
        receiver = RaaSWeightReceiver.__new__(RaaSWeightReceiver)
        receiver.weights_buffer, receiver._safetensors_header, receiver.shm_dir = data, header, work
        t_save = best(lambda: receiver.apply_delta_and_save(delta, target_version=2))
        same_file(os.path.join(work, "model.safetensors"), a.new, "apply_delta_and_save")
        del receiver, data

        delta_path = os.path.join(work, "delta.bin")
        with open(delta_path, "wb") as f:
            f.write(delta)
        t_worker = best(lambda: apply_delta(a.base, delta_path))
        same_file(a.base, a.new, "apply_delta_worker.apply_delta")
        return t_save, t_worker
    finally:
        shutil.rmtree(work)


def same_file(path, want, who):
    got, ref = np.memmap(path, dtype=np.uint8, mode="r"), np.memmap(want, dtype=np.uint8, mode="r")
    assert got.size == ref.size and np.array_equal(got, ref), f"AstraFlow's {who} did not rebuild the new version"


def main():
    ap = argparse.ArgumentParser()
    for a in ("--old", "--new", "--base"):
        ap.add_argument(a, required=True)
    ap.add_argument("--header", type=int, required=True, help="bytes of the safetensors header (8 + JSON)")
    ap.add_argument("--astraflow", help="checkout of AstraFlow: encode with its own _compute_delta (see above)")
    a = ap.parse_args()
    old = np.memmap(a.old, dtype=np.uint16, mode="r", offset=a.header)
    new = np.memmap(a.new, dtype=np.uint16, mode="r", offset=a.header)
    base = np.memmap(a.base, dtype=np.uint16, mode="r+", offset=a.header)
    out = {}

    def encode():
        idx = np.where(new != old)[0]
        idx = idx.astype(np.uint32 if new.size < 1 << 32 else np.uint64)
        out["idx"], out["vals"] = idx, new[idx]

    t_enc = best(encode)
    idx, vals = out["idx"], out["vals"]
    if a.astraflow:
        t_enc = astraflow_encode(a.astraflow, old, new, idx, vals)

    result = {"numpy": np.__version__, "encode": "astraflow" if a.astraflow else "numpy", "encode_seconds": t_enc,
              "apply": "astraflow" if a.astraflow else "numpy", "bytes": 16 + idx.nbytes + vals.nbytes,
              "changed": int(idx.size)}
    if a.astraflow:
        result["apply_seconds"], result["apply_worker_seconds"] = astraflow_apply(a.astraflow, a, idx, vals)
    else:
        def scatter():
            base[idx] = vals

        result["apply_seconds"] = best(scatter)
        assert np.array_equal(base, new), "scatter did not rebuild the new version"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
