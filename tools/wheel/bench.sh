#!/usr/bin/env bash
# The wheel's binary against the `make build` binary on every CPU hot path, side by side in one
# run: each round runs every case with both binaries, alternating which goes first. A benchmark,
# never a test. Prints one table of medians and wheel/build ratios (bench_compare.py).
#
#   tools/wheel/bench.sh [ROUNDS=3]      after make build, make dist (and make wheelproof's data)
#
# Cases: the encoder (MiniLM, passages/s at fp16, int8, bf16), serve (queries/s at 64 clients,
# result cache off, on the proof's 2,000-passage dense index), the mapped flat scan and FAISS's
# flat search (100,000 x 384 synthetic vectors, batches of 64), delta encode (bench kernels).
set -euo pipefail
rounds="${1:-3}"
source "$(dirname "$0")/toolchain.sh"
ROOT="$(cd "$WHEEL_DIR/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/build/wheel/bench"
DATA="$ROOT/build/wheel/proof/data"
[ -d "$DATA" ] || { echo "bench: no $DATA; run make wheelproof first" >&2; exit 1; }
mkdir -p "$OUT/runs"
rm -f "$OUT"/runs/*

# The wheel's binary, installed with pip as a user would (a venv of its own).
whl="$(ls -t dist/needle_rl-*manylinux*.whl | head -1)"
if [ ! -x "$OUT/venv/bin/needle" ] || [ "$whl" -nt "$OUT/venv/bin/needle" ]; then
  rm -rf "$OUT/venv"
  "$WHEEL_VENV/bin/python" -m venv "$OUT/venv"
  "$OUT/venv/bin/pip" install -q --disable-pip-version-check --no-deps "$whl"
fi
declare -A BIN=([build]="$ROOT/bin/needle" [wheel]="$OUT/venv/bin/needle")

# Inputs: a dense index of the proof's corpus, a synthetic flat file and query vectors.
if [ ! -f "$OUT/dense/manifest.json" ]; then
  bin/needle build --corpus "$DATA/corpus.jsonl" --model "$DATA/model" --out "$OUT/dense" --prefix "" >/dev/null 2>&1
fi
if [ ! -f "$OUT/flat/flat.index" ]; then
  "$CACHE/venv/bin/python" bench/synthetic_flat_index.py "$OUT/flat" 100000 384 >/dev/null
  "$CACHE/venv/bin/python" -c "import numpy as np; np.random.default_rng(3).standard_normal((640, 384), dtype=np.float32).tofile('$OUT/q.f32')"
fi

one() {  # one case with one binary: its output into runs/CASE.BINARY.ROUND
  local case=$1 b=$2 r=$3 bin=${BIN[$2]} f="$OUT/runs/$1.$2.$3"
  case $case in
    encode) nice -n 10 "$bin" bench encode --model "$DATA/model" --shape minilm --precision fp16,int8,bf16 --passages 128 --repeat 1 --queries 5 --json >"$f" 2>"$f.err" ;;
    serve)
      local port=$((18000 + RANDOM % 1000))
      "$bin" serve --index "$OUT/dense" --model "$DATA/model" --port $port --cache-mb 0 >"$f.log" 2>&1 & local pid=$!
      until curl -sf "127.0.0.1:$port/ready" >/dev/null; do sleep 0.3; done
      local rc=0
      nice -n 10 bin/needle bench retrieve --url "http://127.0.0.1:$port" --queries "$DATA/queries.jsonl" \
        --concurrency 64 --duration 10s --server-pid $pid >"$f" || rc=$?
      kill $pid; wait $pid 2>/dev/null || true
      return $rc ;;
    flatscan) nice -n 10 "$bin" bench index --index "$OUT/flat/flat.index" --queries "$OUT/q.f32" --batch 64 --batches 10 >"$f" 2>"$f.err" ;;
    faiss) nice -n 10 "$bin" bench search --index "$OUT/flat/flat.index" --batch 64 >"$f" 2>"$f.err" ;;
    delta) nice -n 10 "$bin" bench kernels --only "delta encode" --min-time 1s --json >"$f" 2>"$f.err" ;;
  esac
}
for r in $(seq 1 "$rounds"); do
  for case in encode serve flatscan faiss delta; do
    if [ $((r % 2)) -eq 1 ]; then order="build wheel"; else order="wheel build"; fi
    for b in $order; do
      echo "bench: round $r $case $b (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      one "$case" "$b" "$r"
    done
  done
done
"$WHEEL_VENV/bin/python" "$WHEEL_DIR/bench_compare.py" "$OUT/runs"
