"""Python-faiss side of faissgo's interop tests (run by interop_test.go).

Vectors and results are raw little-endian files: float32 row-major vectors, and results as
n*k float32 distances followed by n*k int64 labels.

  interop.py build FACTORY METRIC DIM DB.f32 INDEX_OUT   build with Python faiss, write INDEX_OUT
  interop.py search INDEX DIM QUERIES.f32 K PARAM VALUE OUT   read INDEX, search, write OUT
                                                 (PARAM "-" for none, else nprobe/efSearch)
"""
import sys

import faiss
import numpy as np


def vectors(path, dim):
    return np.fromfile(path, dtype="<f4").reshape(-1, dim)


def build(factory, metric, dim, db_path, out):
    m = {"IP": faiss.METRIC_INNER_PRODUCT, "L2": faiss.METRIC_L2}[metric]
    index = faiss.index_factory(dim, factory, m)
    db = vectors(db_path, dim)
    if not index.is_trained:
        index.train(db)
    index.add(db)
    faiss.write_index(index, out)


def search(index_path, dim, queries_path, k, param, value, out):
    index = faiss.read_index(index_path)
    if param != "-":
        faiss.ParameterSpace().set_index_parameter(index, param, float(value))
    dist, labels = index.search(vectors(queries_path, dim), k)
    with open(out, "wb") as f:
        f.write(dist.astype("<f4").tobytes())
        f.write(labels.astype("<i8").tobytes())
    print(type(index).__name__, index.ntotal, faiss.__version__)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "build":
        build(args[0], args[1], int(args[2]), args[3], args[4])
    elif cmd == "search":
        search(args[0], int(args[1]), args[2], int(args[3]), args[4], args[5], args[6])
    else:
        sys.exit("unknown command " + cmd)
