"""AstraFlow's delta algorithm in NumPy (docs/en/architecture/delta-weight-transfer.md in
Infini-AI-Lab/astraflow), the baseline of `needle bench weights`, on the benchmark's own files:

    python bench/weights_astraflow.py --old HALF1 --new HALF2 --base SCRATCH --header N

The data sections of two safetensors files (bf16 weights) are compared as uint16: `new != old`,
`np.where`, u32 indices (u64 past 2^32 elements) and the new raw values, after a 16-byte header
{u64 nnz, u16 elem_size, u16 flags, i32 reserved}; apply is NumPy's scatter `base[idx] = vals` into
SCRATCH (a copy of OLD the benchmark wrote), checked against NEW. Best of 3 runs after a warm-up,
one thread (NumPy's). Prints one JSON line.
"""
import argparse
import json
import time

import numpy as np


def best(fn, repeats=3):
    fn()
    t = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - start)
    return t


def main():
    ap = argparse.ArgumentParser()
    for a in ("--old", "--new", "--base"):
        ap.add_argument(a, required=True)
    ap.add_argument("--header", type=int, required=True, help="bytes of the safetensors header (8 + JSON)")
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

    def scatter():
        base[idx] = vals

    t_apply = best(scatter)
    assert np.array_equal(base, new), "scatter did not rebuild the new version"
    print(json.dumps({"numpy": np.__version__, "encode_seconds": t_enc, "apply_seconds": t_apply,
                      "bytes": 16 + idx.nbytes + vals.nbytes, "changed": int(idx.size)}))


if __name__ == "__main__":
    main()
