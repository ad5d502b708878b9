"""Reads bench.sh's runs (CASE.BINARY.ROUND files) and prints, per metric, the median of each
binary over the rounds and the wheel/build ratio (above 1: the wheel is faster)."""
import json
import os
import re
import statistics
import sys


def metrics(case, text):
    """(name, value, higher_is_better) of one run's output."""
    if case == "encode":
        for r in json.loads(text.strip().splitlines()[-1])["results"]:
            yield f"encode {r['precision']} passages/s", r["passages_per_s"], True
            yield f"encode {r['precision']} passages/CPU-s", r["passages_per_cpu_s"], True
    elif case == "serve":
        yield "serve 64 clients queries/s", float(re.search(r"queries/s ([\d.]+)", text).group(1)), True
        m = re.search(r"= ([\d.]+) CPU-s per 1000 queries", text)
        if m:
            yield "serve CPU-s per 1000 queries", float(m.group(1)), False
    elif case == "flatscan":
        yield "flat scan (mapped) queries/s", json.loads(text)["qps"], True
    elif case == "faiss":
        yield "FAISS flat search queries/s", json.loads(text)["qps"], True
    elif case == "delta":
        for r in json.loads(text)["results"]:
            yield f"{r['name']} x{r['threads']} Gelem/s", r["gelems_per_s"], True
            yield f"{r['name']} x{r['threads']} Gelem/CPU-s", r["gelems_per_cpu_s"], True


def main(runs):
    values, better = {}, {}
    for fn in sorted(os.listdir(runs)):
        parts = fn.split(".")
        if len(parts) != 3 or parts[-1] == "err":
            continue
        case, binary, _ = parts
        with open(os.path.join(runs, fn)) as f:
            text = f.read()
        try:
            for name, v, hib in metrics(case, text):
                values.setdefault(name, {}).setdefault(binary, []).append(v)
                better[name] = hib
        except (ValueError, KeyError, AttributeError, IndexError) as e:
            print(f"{fn}: unreadable ({e})", file=sys.stderr)
    print(f"| metric | make build: median (all runs) | wheel: median (all runs) | wheel / build |")
    print("|---|---|---|---|")
    for name, by in values.items():
        a, b = by.get("build", []), by.get("wheel", [])
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = mb / ma if better[name] else ma / mb  # above 1: the wheel does better
        fmt = lambda xs: " ".join(f"{x:.4g}" for x in xs)
        print(f"| {name} | {ma:.4g} ({fmt(a)}) | {mb:.4g} ({fmt(b)}) | {ratio:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
