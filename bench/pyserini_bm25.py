"""pyserini, the BM25 anchor of Search-R1's `--retriever_name bm25`, run by hand as the
parity and speed reference of needle's index/bm25 (docs/retrievers.md).

Setup (pinned; pyserini 0.22.1 is the last release on Java 11+, run here on Debian 12's
openjdk-17; it bundles Anserini 0.22.1 and Lucene 9):
  python3 -m venv ~/.cache/needle/venv-pyserini
  ~/.cache/needle/venv-pyserini/bin/pip install --no-deps pyserini==0.22.1
  ~/.cache/needle/venv-pyserini/bin/pip install -r bench/pyserini_requirements.txt
  ~/.cache/needle/venv-pyserini/bin/pip install -r bench/requirements-torch.txt  # import pyserini.search needs torch
      # (PyPI's torch brings its CUDA packages: the venv is ~5.9 GB)
  export JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64

Usage:
  python bench/pyserini_bm25.py index CORPUS.jsonl INDEX_DIR [THREADS]  # Lucene index (1 thread), prints docs/s
  python bench/pyserini_bm25.py search INDEX_DIR QUERIES.jsonl K OUT.jsonl [N]
      # the first N queries ({"query": ...} per line) -> {"query", "docids", "scores", "ms"} per line
      # (ms: that query's LuceneSearcher.search time), prints ms/query, the median and p99 of
      # those times and the process's peak RSS (Python and the JVM in it)
  python bench/pyserini_bm25.py analyze TEXTS.jsonl OUT.jsonl     # {"text"} -> {"text", "terms"}
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def index(corpus, out, threads="1"):
    # JsonCollection reads a folder of JSONL files ({"id", "contents"} rows).
    src = tempfile.mkdtemp()
    os.symlink(os.path.abspath(corpus), os.path.join(src, "corpus.jsonl"))
    rows = sum(1 for _ in open(corpus, "rb"))
    shutil.rmtree(out, ignore_errors=True)
    t = time.time()
    subprocess.run([sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection",
                    "--input", src, "--index", out, "--generator", "DefaultLuceneDocumentGenerator",
                    "--threads", threads, "--storeRaw"], check=True, stdout=subprocess.DEVNULL)
    dt = time.time() - t
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(json.dumps({"rows": rows, "seconds": round(dt, 2), "docs_per_s": round(rows / dt), "index_bytes": size}))


def search(index_dir, queries, k, out, n=None):
    from pyserini.search.lucene import LuceneSearcher
    s = LuceneSearcher(index_dir)  # BM25 k1=0.9 b=0.4, the default analyzer
    qs = [json.loads(l)["query"] for l in open(queries)]
    if n:
        qs = qs[:int(n)]
    k = int(k)
    res, lat, t = [], [], time.time()
    for q in qs:
        t0 = time.perf_counter()
        hits = s.search(q, k)
        lat.append(time.perf_counter() - t0)
        res.append({"query": q, "docids": [h.docid for h in hits], "scores": [h.score for h in hits],
                    "ms": round(1000 * lat[-1], 4)})
    dt = time.time() - t
    lat.sort()
    with open(out, "w") as f:
        for r in res:
            f.write(json.dumps(r) + "\n")
    print(json.dumps({"queries": len(qs), "ms_per_query": round(1000 * dt / len(qs), 3),
                      "median_ms": round(1000 * lat[len(lat) // 2], 3), "p99_ms": round(1000 * lat[len(lat) * 99 // 100], 3),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def analyze(texts, out):
    from pyserini.analysis import Analyzer, get_lucene_analyzer
    a = Analyzer(get_lucene_analyzer())
    with open(out, "w") as f:
        for l in open(texts):
            t = json.loads(l)["text"]
            f.write(json.dumps({"text": t, "terms": a.analyze(t)}) + "\n")


if __name__ == "__main__":
    {"index": index, "search": search, "analyze": analyze}[sys.argv[1]](*sys.argv[2:])
