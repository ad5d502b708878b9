"""Benchmark of needle_trainer (python/) against NumPy, ratios from one run, 1 thread:

    PYTHONPATH=python ~/.cache/needle/venv/bin/python bench/trainer_python.py [--mib 512]

- read bandwidth: needle_membw_read (platform/membw, vector loads at the library's SIMD
  level) over a --mib buffer: the yardstick of the shares below;
- delta encode of a bf16 tensor (uint16 bits) of --mib MiB with 0.5, 1 and 2% of its elements
  changed in the lowest bit: the C kernel alone (preallocated outputs) and delta_encode (the
  Python call, outputs allocated and trimmed), as GB/s over both inputs and as a share of the
  read bandwidth; NumPy's diff (nonzero + gather) beside it;
- delta apply: delta_apply vs NumPy's scatter base[idx] = vals (bench/delta_numpy.py's baseline),
  and apply's cache-line traffic (read for ownership + write back of each line holding a
  change) as a share of the read bandwidth: the floor both scatters share;
- logprob: logprobs_from_logits on bf16 [N, V] (+ entropy) vs a NumPy fp32 log_softmax +
  gather on the same values already in fp32 (there is no torch in the project venv: the torch
  baseline is bench/logprob_pytorch.py, run by hand);
- Python call overhead: logprobs_from_logits and delta_encode on tiny inputs, per call.
Times are the best of --repeats; CPU time (process_time) is printed beside wall time because
the machine may be shared: compare ratios of the same column.
"""
import argparse
import ctypes
import json
import time

import numpy as np

import needle_trainer as nt
from needle_trainer._arrays import address
from needle_trainer._native import ERR_LEN, lib


def best(fn, repeats):
    """(best wall s, best CPU s) over repeats runs after one warm-up."""
    fn()
    wall = cpu = float("inf")
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


def changed_copy(old, frac, rng):
    """old with about frac of its elements flipped in the lowest bit, at random gaps."""
    new = old.copy()
    gaps = rng.integers(1, int(2 / frac), size=int(old.size * frac * 1.2))
    at = np.cumsum(gaps)
    new[at[at < old.size]] ^= 1
    return new


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="bf16 tensor size for the delta cases")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", type=int, default=128, help="logprob rows N (V = 151936)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    res = {"simd": nt.simd_level(), "numpy": np.__version__, "mib": args.mib}
    err = ctypes.create_string_buffer(ERR_LEN)

    n = args.mib * (1 << 20) // 2
    old = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    total = ctypes.c_uint64()
    read = best(lambda: lib.needle_membw_read(old.ctypes.data, old.nbytes, ctypes.byref(total),
                                              err, ERR_LEN), args.repeats)
    res["read_gb_s"] = {"wall": old.nbytes / read[0] / 1e9, "cpu": old.nbytes / read[1] / 1e9}
    print(f"read bandwidth (1 thread, {args.mib} MiB): {res['read_gb_s']['wall']:.1f} GB/s wall, "
          f"{res['read_gb_s']['cpu']:.1f} GB/s per CPU-s")
    idx, vals = np.empty(n, np.uint32), np.empty(n, np.uint16)
    idx[:], vals[:] = 0, 0  # touched once: the kernel-only case measures no page faults
    res["delta"] = []
    for frac in (0.005, 0.01, 0.02):
        new = changed_copy(old, frac, rng)
        kernel = best(lambda: lib.needle_delta_encode(old.ctypes.data, new.ctypes.data, n, 2,
                                                      idx.ctypes.data, 4, vals.ctypes.data, err,
                                                      ERR_LEN), args.repeats)
        python = best(lambda: nt.delta_encode(old, new), args.repeats)
        np_enc = best(lambda: new[np.nonzero(new != old)[0]], min(args.repeats, 2))
        d = nt.delta_encode(old, new)
        base = old.copy()
        apply = best(lambda: nt.delta_apply(base, d), args.repeats)
        assert base.tobytes() == new.tobytes()
        base = old.copy()
        ix, vs = d.indices, d.values

        def scatter():
            base[ix] = vs
        np_apply = best(scatter, args.repeats)
        # apply's floor: every 64-byte line holding a change is read for ownership and written
        # back (NumPy's scatter moves the same lines), so its traffic is 128 B per touched line.
        lines = int(np.unique(d.indices // 32).size)
        row = {"changed": frac, "nnz": int(d.indices.size), "touched_lines": lines,
               "apply_line_traffic_share_of_read": lines * 128 / apply[0] / (old.nbytes / read[0])}
        for name, (w, c) in (("encode_kernel", kernel), ("encode_python", python),
                             ("encode_numpy", np_enc)):
            # encode reads 2 x the tensor: share = (2 bytes / w) / (bytes / read time)
            row[name] = {"ms": w * 1e3, "cpu_ms": c * 1e3, "gb_s": 2 * old.nbytes / w / 1e9,
                         "share_of_read": 2 * read[0] / w, "share_of_read_cpu": 2 * read[1] / c}
        row["apply_ms"], row["apply_cpu_ms"] = apply[0] * 1e3, apply[1] * 1e3
        row["numpy_apply_ms"], row["numpy_apply_cpu_ms"] = np_apply[0] * 1e3, np_apply[1] * 1e3
        res["delta"].append(row)
        print(f"{100 * frac:.1f}% changed ({row['nnz']} elements): encode kernel "
              f"{row['encode_kernel']['gb_s']:.1f} GB/s = {100 * row['encode_kernel']['share_of_read']:.0f}% "
              f"of read ({100 * row['encode_kernel']['share_of_read_cpu']:.0f}% per CPU-s), "
              f"delta_encode {100 * row['encode_python']['share_of_read']:.0f}% "
              f"({100 * row['encode_python']['share_of_read_cpu']:.0f}%), "
              f"{np_enc[0] / python[0]:.1f}x NumPy; apply {apply[0] * 1e3:.1f} ms vs NumPy "
              f"{np_apply[0] * 1e3:.1f} ms = {np_apply[0] / apply[0]:.2f}x wall, "
              f"{np_apply[1] / apply[1]:.2f}x CPU; apply's line traffic (128 B x {lines} lines) "
              f"= {100 * row['apply_line_traffic_share_of_read']:.0f}% of read")
    del old, new, base, idx, vals, d

    rows, v = args.rows, 151936
    x32 = (rng.standard_normal((rows, v)) * 3).astype(np.float32)
    bits = (x32.view(np.uint32) >> 16).astype(np.uint16)
    x32 = (bits.astype(np.uint32) << 16).view(np.float32)  # the same values in fp32
    labels = rng.integers(0, v, rows)

    def numpy_logprob():
        m = x32.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(x32 - m).sum(axis=1))
        return x32[np.arange(rows), labels] - lse
    ours = best(lambda: nt.logprobs_from_logits(bits, labels, return_entropy=True, bits="bfloat16"),
                args.repeats)
    theirs = best(numpy_logprob, min(args.repeats, 3))
    got = nt.logprobs_from_logits(bits, labels, bits="bfloat16")
    res["logprob"] = {"rows": rows, "vocab": v, "needle_ms": ours[0] * 1e3,
                      "numpy_fp32_ms": theirs[0] * 1e3, "ratio_wall": theirs[0] / ours[0],
                      "ratio_cpu": theirs[1] / ours[1],
                      "needle_share_of_read": rows * v * 2 / ours[0] / (res["read_gb_s"]["wall"] * 1e9),
                      "max_abs_diff": float(np.max(np.abs(got - numpy_logprob())))}
    print(f"logprob bf16 N={rows} V={v} (+entropy): {ours[0] * 1e3:.1f} ms, NumPy fp32 logprob only "
          f"{theirs[0] * 1e3:.1f} ms = {res['logprob']['ratio_wall']:.1f}x wall, "
          f"{res['logprob']['ratio_cpu']:.1f}x CPU")

    small, small_labels = np.zeros((1, 8), np.float32), np.zeros(1, np.int64)
    out = np.empty(1, np.float32)
    ptrs = [address(a) for a in (small, small_labels, out)]
    a16, b16 = np.zeros(64, np.uint16), np.ones(64, np.uint16)
    calls = 2000

    def per_call(fn):
        w, _ = best(lambda: [fn() for _ in range(calls)], 5)
        return w / calls * 1e6
    res["overhead_us"] = {
        "logprobs_from_logits": per_call(lambda: nt.logprobs_from_logits(small, small_labels)),
        "ctypes_only": per_call(lambda: lib.needle_logprob_f32(
            ptrs[0], 1, 8, ptrs[1], 1.0, -100, 1, ptrs[2], None, None, err, ERR_LEN)),
        "delta_encode_64": per_call(lambda: nt.delta_encode(a16, b16)),
    }
    o = res["overhead_us"]
    print(f"call overhead: logprobs_from_logits [1, 8] {o['logprobs_from_logits']:.1f} us "
          f"(bare ctypes call {o['ctypes_only']:.1f} us), delta_encode of 64 elements "
          f"{o['delta_encode_64']:.1f} us")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
