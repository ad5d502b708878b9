"""By-hand baseline: what Search-R1's search_r1/search/retrieval_server.py does, on CPU.

Written for side-by-side benchmarks against `needle serve` (same index, corpus, model,
queries, load generator `needle bench retrieve`). Not part of `make test`.

Like the anchor it loads the corpus with `datasets.load_dataset("json", ...)`, reads the
FAISS index with faiss-cpu, encodes queries with transformers (AutoModel + AutoTokenizer,
max_length 256, pad to longest, mean pooling over the attention mask, L2 normalize; "query: "
prefix when the retriever name contains "e5"), splits a request into chunks of 512 queries
(encode, then search), looks documents up by FAISS row number and answers from a sync
FastAPI endpoint (so requests run in uvicorn's thread pool). Unlike the anchor it does not
answer 500 to return_scores=false (Search-R1 PR #176) and runs fp32 on the CPU even where a
GPU is present (the anchor uses fp16 on a GPU).

Run with the venv that has torch (~/.cache/needle/venv-torch):
  python bench/anchor_server.py --index_path IDX --corpus_path CORPUS.jsonl \
      --retriever_model ~/.cache/needle/models/all-MiniLM-L6-v2 --retriever_name minilm --port 8001
Ready when GET /ready answers 200 (the anchor has no such endpoint; it is added so that
time-to-ready can be measured the same way for both servers).
"""
import argparse
import time
from typing import List, Optional

import datasets
import faiss
import numpy as np
import torch
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from transformers import AutoModel, AutoTokenizer

BATCH = 512  # the anchor's retrieval_batch_size


class QueryRequest(BaseModel):
    queries: List[str]
    topk: Optional[int] = None
    return_scores: bool = False


class DenseRetriever:
    def __init__(self, args):
        self.index = faiss.read_index(args.index_path)
        self.corpus = datasets.load_dataset("json", data_files=args.corpus_path, split="train", num_proc=2)
        self.tokenizer = AutoTokenizer.from_pretrained(args.retriever_model, use_fast=True)
        self.model = AutoModel.from_pretrained(args.retriever_model).eval()
        self.prefix = "query: " if "e5" in args.retriever_name.lower() else ""
        self.topk = args.topk

    @torch.no_grad()
    def encode(self, queries):
        texts = [self.prefix + q for q in queries]
        inputs = self.tokenizer(texts, max_length=256, padding=True, truncation=True, return_tensors="pt")
        out = self.model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(out.dtype)
        emb = (out * mask).sum(dim=1) / mask.sum(dim=1)
        emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb.numpy().astype(np.float32, order="C")

    def batch_search(self, queries, k):
        results, scores = [], []
        for start in range(0, len(queries), BATCH):
            emb = self.encode(queries[start:start + BATCH])
            dist, idx = self.index.search(emb, k)
            for row_ids, row_scores in zip(idx.tolist(), dist.tolist()):
                results.append([self.corpus[int(i)] for i in row_ids])
                scores.append(row_scores)
        return results, scores


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--index_path", required=True)
    p.add_argument("--corpus_path", required=True)
    p.add_argument("--retriever_model", required=True)
    p.add_argument("--retriever_name", default="e5")
    p.add_argument("--topk", type=int, default=3)
    p.add_argument("--port", type=int, default=8001)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    began = time.time()
    retriever = DenseRetriever(args)
    print(f"anchor_server: loaded in {time.time() - began:.1f}s", flush=True)
    app = FastAPI()

    @app.get("/ready")
    def ready():
        return {"status": "ready"}

    @app.post("/retrieve")
    def retrieve(request: QueryRequest):
        k = request.topk or retriever.topk
        results, scores = retriever.batch_search(request.queries, k)
        if request.return_scores:
            return {"result": [[{"document": d, "score": s} for d, s in zip(docs, sc)]
                               for docs, sc in zip(results, scores)]}
        return {"result": results}

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
