"""By hand (not in `make test`): a wiki-18-shaped vector set for the scale benchmarks of the
mapped flat index and its compact forms. Streams, never holds the set in RAM.

Writes, under OUT:
  flat.index   FAISS IndexFlatIP of N unit vectors of width D (byte for byte what
               faiss.write_index writes; N = 21,015,324, D = 768 by default: 64.6 GB)
  queries.f32  Q query vectors (float32, Q x D, row-major, little-endian)
  gt.i64       the exact top-K ids of each query over all N rows (int64, Q x K), best first
  gt.f32       their inner products (float32, Q x K)
  meta.json    the parameters

Structure, because i.i.d. Gaussian vectors hide recall problems (every point is about as far
from every other, no clusters for IVF to find, full-rank noise for PQ): e5 passage vectors
are unit length, share a strong common direction (random pairs have cosine ~0.7), live near a
low-dimensional subspace and form topical clusters of very uneven sizes. Each row here is
  normalize(mu + B (c_k + s z) + e)
with mu the common direction, B a fixed D x R basis with a decaying spectrum (R = 96
intrinsic dimensions), c_k one of C = 16,384 cluster centres drawn with Zipf-like
probabilities, z ~ N(0, I_R) the spread inside a cluster and e isotropic noise carrying 5%
of the energy over all D dimensions. Queries are new draws from the same clusters (near the data, never copies of rows).
Every 65,536-row chunk has its own seeded generator, so a run with a smaller N writes the
first N rows of the full set (a subset that FAISS can hold in RAM, for exactness checks).

Ground truth: numpy float32 matmul per chunk, merged top-K (ids of near-ties may come in
another order than FAISS's; compare them as sets).

Usage: ~/.cache/needle/venv/bin/python bench/wiki18_shape.py OUT [--n 21015324] [--d 768]
       [--queries 1000] [--k 100]        (run it with nice -n 10: 3,300-6,000 rows/s on a
       shared 2-core machine, 1-2 hours at full size, a third of it the ground truth)
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

CHUNK = 65536
R, C = 96, 16384


def model(d, seed):
    """The fixed parts: mu, B, the cluster centres and their probabilities."""
    rng = np.random.default_rng([seed, 0xB])
    spectrum = (np.arange(R) + 1.0) ** -0.5
    basis = (rng.standard_normal((d, R)) * spectrum / np.sqrt(d)).astype(np.float32)
    centres = rng.standard_normal((C, R)).astype(np.float32)
    p = (np.arange(C) + 1.0) ** -0.8
    p /= p.sum()
    # Energy of B (c + s z): sum of spectrum^2 x (1 + 0.5^2) per intrinsic dimension.
    inner = np.sum(spectrum**2) * 1.25
    noise = np.sqrt(0.05 * inner / d)  # ambient noise: 5% of the energy, spread over all D
    mu = rng.standard_normal(d)
    mu *= np.sqrt(2.0 * inner) / np.linalg.norm(mu)  # random pairs then have cosine ~0.65
    return mu.astype(np.float32), basis, centres, p, np.float32(noise)


def draw(rng, n, parts):
    mu, basis, centres, p, noise = parts
    k = rng.choice(C, size=n, p=p)
    z = centres[k] + 0.5 * rng.standard_normal((n, R), dtype=np.float32)
    x = z @ basis.T
    x += mu
    x += noise * rng.standard_normal(x.shape, dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def header(n, d):
    # faiss/impl/index_write.cpp: fourcc, d, ntotal, two unused 1<<20, is_trained, metric IP,
    # then the float count of the vector data.
    return b"IxFI" + struct.pack("<iqqqBiQ", d, n, 1 << 20, 1 << 20, 1, 0, n * d)


def merge(best_s, best_i, s, first, k):
    """Keeps the k largest of best (Q x k, best first) and of the chunk's scores s (Q x rows,
    row 0 = id first). Once k are kept, only scores >= each query's k-th are candidates."""
    nq = s.shape[0]
    if best_s.shape[1] < k:
        top = min(k, s.shape[1])
        part = np.argpartition(-s, top - 1, axis=1)[:, :top]
        new_s, new_i = np.take_along_axis(s, part, axis=1), part + first
    else:
        qi, ri = np.nonzero(s >= best_s[:, -1:])
        if len(qi) == 0:
            return best_s, best_i
        counts = np.bincount(qi, minlength=nq)
        pos = np.arange(len(qi)) - np.repeat(np.cumsum(counts) - counts, counts)
        new_s = np.full((nq, counts.max()), -np.inf, np.float32)
        new_i = np.full((nq, counts.max()), -1, np.int64)
        new_s[qi, pos], new_i[qi, pos] = s[qi, ri], ri + first
    cand_s = np.concatenate([best_s, new_s], axis=1)
    cand_i = np.concatenate([best_i, new_i], axis=1)
    order = np.lexsort((cand_i, -cand_s))[:, :k]  # by score, then id
    return np.take_along_axis(cand_s, order, axis=1), np.take_along_axis(cand_i, order, axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=21_015_324)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--seed", type=int, default=18)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    parts = model(a.d, a.seed)
    q = draw(np.random.default_rng([a.seed, 0xC0FFEE]), a.queries, parts)
    best_s = np.full((a.queries, 0), -np.inf, np.float32)
    best_i = np.zeros((a.queries, 0), np.int64)
    tmp = os.path.join(a.out, "flat.index.tmp")
    began = time.time()
    with open(tmp, "wb") as f:
        f.write(header(a.n, a.d))
        for c, first in enumerate(range(0, a.n, CHUNK)):
            x = draw(np.random.default_rng([a.seed, c]), CHUNK, parts)[: min(CHUNK, a.n - first)]
            f.write(x.tobytes())
            best_s, best_i = merge(best_s, best_i, q @ x.T, first, a.k)
            done = first + len(x)
            if c % 16 == 0 or done == a.n:
                el = time.time() - began
                print(f"\r{done:,}/{a.n:,} rows, {done / el:,.0f} rows/s, ETA {el * (a.n - done) / done:,.0f} s   ",
                      end="", file=sys.stderr, flush=True)
    os.replace(tmp, os.path.join(a.out, "flat.index"))
    q.astype("<f4").tofile(os.path.join(a.out, "queries.f32"))
    best_i.astype("<i8").tofile(os.path.join(a.out, "gt.i64"))
    best_s.astype("<f4").tofile(os.path.join(a.out, "gt.f32"))
    meta = {"n": a.n, "d": a.d, "queries": a.queries, "k": a.k, "seed": a.seed, "intrinsic_dims": R,
            "clusters": C, "seconds": round(time.time() - began, 1)}
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f)
    print(f"\n{json.dumps(meta)}", file=sys.stderr)


if __name__ == "__main__":
    main()
