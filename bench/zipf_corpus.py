"""Writes a wiki-shaped corpus with a Zipfian vocabulary for the BM25 rehearsal
(docs/measurements/2026-11-27-bm25-pruning.md), and queries drawn from it. Run by hand in
bench/pyserini_bm25.py's venv (numpy):

  python bench/zipf_corpus.py ROWS VOCAB CORPUS.jsonl QUERIES.jsonl [NQUERIES]

Rows are {"id", "contents": "\"Title\"\ntext"} with 90-110 words drawn from VOCAB pseudo-words
of Zipf exponent 1.0 (rank r has weight 1/r), as word frequencies in English text are; queries
are 1-8 words of random rows, so common words with long postings come up as in real queries.
"""
import json
import sys

import numpy as np

SYL = ["an", "ber", "ca", "do", "el", "for", "gi", "har", "in", "jo", "ka", "lin", "mo", "nor", "o",
       "pra", "qu", "ri", "sta", "te", "u", "ver", "wa", "xi", "yo", "ze"]


def word(r):
    w = []
    while True:
        w.append(SYL[r % len(SYL)])
        r //= len(SYL)
        if r == 0:
            return "".join(w) + "q"  # a final q keeps Porter's stemmer from merging words


def main(rows, vocab, corpus, queries, nq=2000):
    rows, vocab, nq = int(rows), int(vocab), int(nq)
    rng = np.random.default_rng(7)
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1))
    cdf /= cdf[-1]
    words = [word(r) for r in range(vocab)]
    qrows = set(rng.choice(rows, nq, replace=False).tolist())
    qs = []
    with open(corpus, "w") as f:
        for i in range(rows):
            n = int(rng.integers(90, 111))
            ranks = np.searchsorted(cdf, rng.random(n + 3))
            text = " ".join(words[r] for r in ranks[3:])
            title = " ".join(words[r] for r in ranks[:3])
            f.write(json.dumps({"id": str(i), "contents": f'"{title}"\n{text}'}) + "\n")
            if i in qrows:
                k = int(rng.integers(1, 9))
                qs.append(" ".join(words[r] for r in rng.choice(ranks[3:], k, replace=False)))
    with open(queries, "w") as f:
        for q in qs:
            f.write(json.dumps({"query": q}) + "\n")
    print(json.dumps({"rows": rows, "vocab": vocab, "queries": len(qs)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
