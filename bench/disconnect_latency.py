"""By hand: how soon a single query is answered after a 2,560-query POST's client disconnects,
against that server's idle latency, for one or more needle binaries run alternately on the same
index (docs/measurements/2026-11-24-disconnect-latency.md). Not part of `make test`.

A cycle: 5 single-query POSTs (idle: their median), one Search-R1-shaped POST of 2,560 distinct
queries whose socket is closed once 2 encoder batches of it began, then 3 single queries, the
first sent as soon as /metrics counts the disconnect. Each binary serves CYCLES cycles per
round, ROUNDS rounds, binaries alternating; the result cache is off so that the single query is
encoded every time. Prints one JSON line per cycle, then per binary the medians and the share of
cycles whose first query after the disconnect came within 2x of that cycle's idle median.

  python3 bench/disconnect_latency.py INDEX MODEL QUERIES.jsonl ROUNDS CYCLES BIN...
  (QUERIES.jsonl: {"query": ...} per line, e.g. tools/wordnet's queries.jsonl)
"""
import http.client
import json
import socket
import statistics
import subprocess
import sys
import time

index, model, queries_file, rounds, cycles, bins = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
queries = list(dict.fromkeys(json.loads(line)["query"] for line in open(queries_file)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def wait(port, name, ok):
    while not ok(metric(port, name)):
        time.sleep(0.005)


def single(port):
    """One query on a new connection, as Search-R1's requests.post makes it; milliseconds."""
    body = json.dumps({"queries": [queries[0]], "topk": 3, "return_scores": True})
    began = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/retrieve", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        sys.exit(f"single query: status {r.status}")
    return (time.perf_counter() - began) * 1000


def ready(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/ready")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


big = [q + (f" ({i // len(queries)})" if i >= len(queries) else "") for i, q in enumerate(queries[i % len(queries)] for i in range(2560))]
post = json.dumps({"queries": big, "topk": 3, "return_scores": True}).encode()
results = []
for rnd in range(rounds):
    for binary in bins:
        port = free_port()
        server = subprocess.Popen([binary, "serve", "--index", index, "--model", model, "--port", str(port), "--cache-mb", "0"],
                                  stderr=subprocess.DEVNULL)
        while not ready(port):
            time.sleep(0.1)
        for cycle in range(cycles):
            idle = statistics.median(single(port) for _ in range(5))
            batches = metric(port, "needle_batch_queries_count")
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(post) + post)
            wait(port, "needle_batch_queries_count", lambda v: v >= batches + 2)
            gone = metric(port, "needle_client_disconnects_total")
            s.close()
            wait(port, "needle_client_disconnects_total", lambda v: v > gone)
            after = [single(port) for _ in range(3)]
            wait(port, "needle_queue_queries", lambda v: v == 0)
            row = {"bin": binary, "round": rnd, "cycle": cycle, "idle_ms": round(idle, 2), "after_ms": [round(a, 2) for a in after],
                   "load": open("/proc/loadavg").read().split()[0]}
            results.append(row)
            print(json.dumps(row), flush=True)
        server.terminate()
        server.wait()
for binary in bins:
    rows = [r for r in results if r["bin"] == binary]
    ratios = [r["after_ms"][0] / r["idle_ms"] for r in rows]
    print(f"{binary}: {len(rows)} cycles, idle median {statistics.median(r['idle_ms'] for r in rows):.1f} ms, "
          f"first after the disconnect median {statistics.median(r['after_ms'][0] for r in rows):.1f} ms, "
          f"after/idle median {statistics.median(ratios):.1f}x, within 2x in {sum(x <= 2 for x in ratios)} of {len(rows)}")
