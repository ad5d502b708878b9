"""By hand: run Search-R1's own search_r1/search/retrieval_server.py, from a checkout you give,
on the CPU, for side-by-side benchmarks with `needle serve` (same index, corpus, model, queries,
load generator `needle bench retrieve`). Not part of `make test`; nothing of Search-R1 is copied.

The server's code runs as it ships; from outside, three things are patched so that it runs
on a machine without a GPU at its best CPU speed:
  - Module.cuda() and Tensor.cuda() are the identity (no GPU),
  - Module.half() is the identity (its use_fp16=True would run fp16 matmuls on the CPU, slower
    than fp32 there; on a GPU the anchor runs fp16),
  - uvicorn.run listens on --port instead of its fixed 8000.

  ~/.cache/needle/venv-torch/bin/python bench/searchr1_cpu.py \\
      SEARCH_R1/search_r1/search/retrieval_server.py --port 8001 -- \\
      --index_path IDX/index.faiss --corpus_path CORPUS.jsonl --topk 3 \\
      --retriever_name minilm --retriever_model ~/.cache/needle/models/all-MiniLM-L6-v2

It is ready when POST /retrieve answers (it has no health endpoint).
"""
import argparse
import runpy
import sys

import torch
import uvicorn


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("server", help="path of Search-R1's retrieval_server.py")
    p.add_argument("--port", type=int, default=8001)
    ours, sep, args = sys.argv[1:], "--", []
    if sep in ours:  # after --: the server's own flags
        ours, args = ours[:ours.index(sep)], ours[ours.index(sep) + 1:]
    a = p.parse_args(ours)

    torch.nn.Module.cuda = lambda self, *x, **k: self
    torch.Tensor.cuda = lambda self, *x, **k: self
    torch.nn.Module.half = lambda self, *x, **k: self
    run = uvicorn.run
    uvicorn.run = lambda app, **k: run(app, **{**k, "port": a.port, "host": "127.0.0.1"})

    sys.argv = [a.server] + args
    runpy.run_path(a.server, run_name="__main__")


if __name__ == "__main__":
    main()
