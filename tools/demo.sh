#!/usr/bin/env bash
# `make run`: the embedded default. Builds (once; a rerun is a no-op) the WordNet demo index with
# the real MiniLM encoder and serves it on 127.0.0.1:8000 with a ready curl example.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${NEEDLE_CACHE:-$HOME/.cache/needle}"
MODEL="$CACHE/models/all-MiniLM-L6-v2"
DEMO="$CACHE/demo"
PORT="${PORT:-8000}"

# 20,000 of WordNet's 117,659 synsets, evenly spaced: encoded in about 70 s on an idle 2-core
# machine (all of them: 6-12 minutes). DEMO_SYNSETS=0 builds the whole WordNet.
SYNSETS="${DEMO_SYNSETS:-20000}"
DATA="$DEMO/wordnet-$SYNSETS"
if [ ! -s "$DATA/corpus.jsonl" ]; then
  go run ./tools/wordnet --limit "$SYNSETS" --out "$DATA"
fi
# MiniLM was trained without e5's prefixes: passages and queries are encoded as they are.
bin/needle build --corpus "$DATA/corpus.jsonl" --model "$MODEL" --out "$DATA/index" --prefix ""

cat >&2 <<MSG

needle is starting on 127.0.0.1:$PORT (WordNet glosses, all-MiniLM-L6-v2, FAISS Flat). Try:
  curl -s http://127.0.0.1:$PORT/retrieve -H 'Content-Type: application/json' \\
    -d '{"queries": ["a large domesticated animal used for riding"], "topk": 3, "return_scores": true}'
Ctrl-C stops it.

MSG
exec bin/needle serve --index "$DATA/index" --model "$MODEL" --port "$PORT"
