"""Runs the trainers' retrieval clients in loops against one address while the test starts,
drains, restarts or replaces needle under them, until STOP_FILE exists:
- Search-R1's call (searchr1.py: restated, no registry ships it): one POST of a turn's
  queries, no timeout, no retry; its loop is one trainer, one turn after the other;
- verl 0.5.0's own call_search_api (verl/tools/utils/search_r1_like_utils.py, trainers.py):
  requests, 30 s timeout, 10 attempts on 5xx and
  connection errors, 1..9 s apart; it returns (None, error) instead of raising;
- RLinf 0.3.0's own AsyncSearchClient (rlinf/agents/searchr1/search_tool_worker.py,
  trainers.py): aiohttp, 10 attempts 10 s apart on any error;
- ASearcher's client (asearcher.py: restated, no registry ships it), through ADDRESS_DIR.
CLIENTS names those to run (comma-separated). Each runs WORKERS loops of one query per call
(Search-R1: one loop of TURN queries per call). A call that gives no answer of topk rows is
a failed call; an exception out of a client (e.g. IndexError on an empty address folder) is
a crash: the script prints it and exits 1. Search-R1's client raises on any failure, so its
exceptions are counted as failed calls (each would end a training step).
Usage: lifecycle.py CLIENTS_DIR ADDRESS_DIR HOST:PORT QUERIES_JSON STOP_FILE WORKERS CLIENTS
-> prints {"verl": {"ok": n, "failed": m}, ...} for each client run, as JSON. While it runs,
STOP_FILE.progress holds the same counts and "asearcher_failed_attempts" (ASearcher's failed
posts, each followed by a re-read of the address folder), rewritten every 50 ms: what the test
waits on."""
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
import types

import asearcher
import searchr1
import trainers

clients_dir, address_dir, host_port, queries_file, stop_file, workers, names = sys.argv[1:8]
workers, names = int(workers), names.split(",")
with open(queries_file) as f:
    queries = json.load(f)
TURN = 32  # queries in one Search-R1 POST


verl = trainers.verl(clients_dir)
rlinf = trainers.rlinf(clients_dir)

stats = {name: {"ok": 0, "failed": 0} for name in names}
lock = threading.Lock()
crashes = []


def thread_crash(args):
    crashes.append(args.exc_value)
    threading.__excepthook__(args)


threading.excepthook = thread_crash


def count(name, ok):
    with lock:
        stats[name]["ok" if ok else "failed"] += 1


def verl_loop(i):
    n = i
    while not os.path.exists(stop_file):
        result, err = verl.call_search_api(f"http://{host_port}/retrieve", [queries[n % len(queries)]], topk=3, return_scores=True)
        count("verl", err is None and len(result["result"][0]) == 3)
        n += workers


def searchr1_loop():
    n = 0
    while not os.path.exists(stop_file):
        turn = [queries[(n + j) % len(queries)] for j in range(TURN)]
        try:
            result = searchr1.batch_search(f"http://{host_port}", turn, 3)
            ok = len(result) == TURN and all(searchr1.passages2string(r).count("Doc ") == 3 for r in result)
        except Exception as e:  # noqa: BLE001 (the trainer's step would end here)
            print(f"Search-R1 call failed: {e!r}", file=sys.stderr)
            ok = False
        count("searchr1", ok)
        n += TURN


async def rlinf_loop(client, i):
    n = i
    while not os.path.exists(stop_file):
        result = await client.query_async({"queries": [queries[n % len(queries)]], "topk": 5, "return_scores": False})
        count("rlinf", len(result[0]["documents"]) == 5)
        n += workers


asearcher_clients = []


def progress_loop():
    path = stop_file + ".progress"
    while not os.path.exists(stop_file):
        with lock:
            snapshot = {"stats": stats, "asearcher_failed_attempts": sum(c.failed_attempts for c in asearcher_clients)}
            text = json.dumps(snapshot)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        time.sleep(0.05)


async def asearcher_loop(i):
    client = asearcher.AddressDirClient(address_dir)
    with lock:
        asearcher_clients.append(client)
    n = i
    while not os.path.exists(stop_file):
        count("asearcher", len(await client.retrieve(queries[n % len(queries)])) == 5)
        n += workers


async def main():
    cfg = types.SimpleNamespace(tools=types.SimpleNamespace(search=types.SimpleNamespace(server_addr=host_port)))
    client = rlinf.AsyncSearchClient(cfg)
    threads = [threading.Thread(target=progress_loop)]
    threads += [threading.Thread(target=verl_loop, args=(i,)) for i in range(workers) if "verl" in names]
    if "searchr1" in names:
        threads.append(threading.Thread(target=searchr1_loop))
    for t in threads:
        t.start()
    loops = [rlinf_loop(client, i) for i in range(workers) if "rlinf" in names]
    loops += [asearcher_loop(i) for i in range(workers) if "asearcher" in names]
    await asyncio.gather(*loops)
    for t in threads:
        t.join()


with contextlib.redirect_stdout(sys.stderr):  # RLinf's client prints; stdout is for the result
    asyncio.run(main())
if crashes:
    sys.exit(1)
json.dump(stats, sys.stdout)
