#!/usr/bin/env bash
# Two needle binaries that link different FAISS releases, side by side in one run: build time
# (`needle build --embeddings`: FAISS's train and add) and search speed (`needle bench index
# --index-backend faiss`: queries/s in batches of 64) per index type. Each round runs every case
# with both binaries, alternating which goes first. A benchmark, never a test.
#
#   bench/faiss_versions.sh OLD_BIN NEW_BIN [ROUNDS=3] [N=50000] [DIM=384]
#
# Data: bench/synthetic_flat_index.py's random unit vectors (corpus and flat file) and 640 random
# queries, kept in build/faiss-versions. Prints one line per run (case, binary, round, seconds or
# q/s) and a table of medians with NEW/OLD ratios.
set -euo pipefail
old="$1" new="$2" rounds="${3:-3}" n="${4:-50000}" dim="${5:-384}"
cd "$(dirname "$0")/.."
py="${NEEDLE_CACHE:-$HOME/.cache/needle}/venv/bin/python"
data="build/faiss-versions/$n-$dim"
if [ ! -f "$data/flat.index" ]; then
  "$py" bench/synthetic_flat_index.py "$data" "$n" "$dim" >/dev/null
  "$py" -c "import numpy as np; np.random.default_rng(3).standard_normal((640, $dim), dtype=np.float32).tofile('$data/q.f32')"
fi
declare -A BIN=([old]="$old" [new]="$new")
# factory and the search parameter that `needle bench index` sets
cases=("Flat" "HNSW32" "IVF256,Flat --nprobe 16" "SQ8")
runs="build/faiss-versions/runs.txt"
: >"$runs"
for r in $(seq "$rounds"); do
  order=(old new)
  if [ $((r % 2)) = 0 ]; then order=(new old); fi
  for c in "${cases[@]}"; do
    factory="${c%% *}" param=""
    if [ "$factory" != "$c" ]; then param="${c#* }"; fi
    for b in "${order[@]}"; do
      out="build/faiss-versions/$b-${factory//,/_}"
      rm -rf "$out"
      start=$(date +%s.%N)
      "${BIN[$b]}" build --corpus "$data/corpus.jsonl" --embeddings "$data/flat.index" --factory "$factory" \
        --out "$out" >/dev/null 2>&1
      build_s=$(echo "$(date +%s.%N) - $start" | bc)
      # shellcheck disable=SC2086 # param is a flag and its value
      qps=$("${BIN[$b]}" bench index --index "$out/index.faiss" --index-backend faiss --queries "$data/q.f32" \
        --batch 64 --batches 10 $param 2>/dev/null | "$py" -c 'import json, sys; print(json.load(sys.stdin)["qps"])')
      echo "$factory $b $r build_s $build_s qps $qps" | tee -a "$runs"
    done
  done
done
"$py" - "$runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f, b, _, _, build, _, qps = line.split()
    runs.setdefault(f, {}).setdefault(b, []).append((float(build), float(qps)))
print("| index | build s old | build s new | new/old | search q/s old | search q/s new | new/old |")
print("|---|---|---|---|---|---|---|")
for f, by in runs.items():
    med = {b: [statistics.median(x[i] for x in by[b]) for i in (0, 1)] for b in ("old", "new")}
    print(f"| {f} | {med['old'][0]:.2f} | {med['new'][0]:.2f} | {med['new'][0] / med['old'][0]:.2f} "
          f"| {med['old'][1]:.0f} | {med['new'][1]:.0f} | {med['new'][1] / med['old'][1]:.2f} |")
PY
