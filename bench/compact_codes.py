"""By hand (not in `make test`): recall@10 after exact re-scoring, for candidate codes of several
kinds, on a wiki-18-shaped set written by bench/wiki18_shape.py (e.g. its first 1,000,000 rows:
`wiki18_shape.py OUT --n 1000000`). Python faiss (the pinned venv's): recall does not depend on
the FAISS build, speed does (measure that with `needle convert` + `needle bench index`).

Usage: ~/.cache/needle/venv/bin/python bench/compact_codes.py DIR FACTORY...
       e.g. DIR=/work/scale/w1m "IVF1024,PQ64np" "OPQ64_256,IVF1024,PQ64np" "IVF1024,PQ192np"
Prints, per factory and nprobe (16, 64): the codes' own recall@10 and the recall@10 after
re-scoring the best R candidates exactly (R = 50, 100, 200, 400).
"""
import sys
import time

import faiss
import numpy as np

faiss.omp_set_num_threads(2)
d = 768
folder = sys.argv[1]
x = np.ascontiguousarray(np.memmap(f"{folder}/flat.index", dtype="<f4", mode="r", offset=45).reshape(-1, d))
q = np.fromfile(f"{folder}/queries.f32", "<f4").reshape(-1, d)[:300]
gt = np.fromfile(f"{folder}/gt.i64", "<i8").reshape(-1, 100)[:300, :10]
train = x[np.sort(np.random.default_rng(0).choice(len(x), 65536, replace=False))]


def recall(ids):
    return np.mean([len(set(a[:10]) & set(b)) / 10 for a, b in zip(ids, gt)])


def rescore(cand, r):
    out = []
    for i in range(len(q)):
        c = cand[i, :r]
        c = c[c >= 0]
        out.append(c[np.argsort(-(x[c] @ q[i]))[:10]])
    return out


for factory in sys.argv[2:]:
    began = time.time()
    index = faiss.index_factory(d, factory, faiss.METRIC_INNER_PRODUCT)
    index.train(train)
    index.add(x)
    built = time.time() - began
    for nprobe in [16, 64]:
        faiss.ParameterSpace().set_index_parameter(index, "nprobe", nprobe)
        _, cand = index.search(q, 400)
        print(factory, "bytes/row", index.sa_code_size(), "build", round(built), "s nprobe", nprobe,
              "codes", round(recall(cand), 3), " ".join(f"R{r}={recall(rescore(cand, r)):.3f}" for r in [50, 100, 200, 400]),
              flush=True)
