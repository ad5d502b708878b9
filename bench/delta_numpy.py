"""NumPy baseline for `needle bench kernels` delta cases (run by hand, main venv):

    ~/.cache/needle/venv/bin/python bench/delta_numpy.py [--mib 1024] [--repeats 3]

Same shapes as bench/delta.go: a bf16 tensor (uint16 bits) of --mib MiB with 0.5%,
1% and 2% of its elements changed in the lowest mantissa bit. Encode is AstraFlow's NumPy diff
(np.nonzero(new != old) + gather of new values, u32 indices); apply is NumPy's scatter
base[idx] = vals. Prints the best of --repeats runs, wall and process CPU time: encode GB/s counts both inputs
(2 x tensor bytes), apply GB/s counts the tensor bytes, and G elem/CPU-s is tensor elements per
CPU second, as needle's bench does (compare that column on a busy machine).
"""
import argparse
import time

import numpy as np


def best(fn, repeats):
    """Best wall time and best process CPU time (robust to a busy machine) over repeats runs."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - cpu_start)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024, help="tensor size in MiB")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement; the best counts")
    args = ap.parse_args()
    n = args.mib * (1 << 20) // 2
    rng = np.random.default_rng(0)
    old = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    nbytes = old.nbytes
    print(f"numpy {np.__version__}, bf16 tensor of {nbytes >> 20} MiB ({n} elements), 1 thread")
    for frac in (0.005, 0.01, 0.02):
        new = old.copy()
        pos = np.cumsum(rng.integers(1, int(2 / frac), size=int(n * frac * 1.1)))
        pos = pos[pos < n]
        new[pos] ^= 1

        out = {}

        def encode():
            idx = np.nonzero(new != old)[0].astype(np.uint32)
            out["idx"], out["vals"] = idx, new[idx]

        t_enc, c_enc = best(encode, args.repeats)
        idx, vals = out["idx"], out["vals"]
        assert idx.size == pos.size
        base = old.copy()

        def scatter():
            base[idx] = vals

        t_apply, c_apply = best(scatter, args.repeats)
        assert np.array_equal(base, new)
        print(f"{100 * frac:.1f}% changed ({idx.size} elements): "
              f"encode {t_enc * 1e3:.1f} ms wall = {2 * nbytes / t_enc / 1e9:.2f} GB/s, {c_enc * 1e3:.1f} ms CPU "
              f"= {n / c_enc / 1e9:.3f} G elem/CPU-s; "
              f"apply (scatter) {t_apply * 1e3:.1f} ms wall = {nbytes / t_apply / 1e9:.2f} GB/s of tensor, "
              f"{c_apply * 1e3:.1f} ms CPU = {n / c_apply / 1e9:.3f} G elem/CPU-s")


if __name__ == "__main__":
    main()
