"""Runs the trainers' retrieval clients in loops against one address while the test starts,
drains and restarts needle under them, until STOP_FILE exists:
- verl 0.5.0's own call_search_api (verl/tools/utils/search_r1_like_utils.py, trainers.py):
  requests, 30 s timeout, 10 attempts on 5xx and
  connection errors, 1..9 s apart; it returns (None, error) instead of raising;
- RLinf 0.3.0's own AsyncSearchClient (rlinf/agents/searchr1/search_tool_worker.py,
  trainers.py): aiohttp, 10 attempts 10 s apart on any error;
- ASearcher's client (asearcher.py: restated, no registry ships it), through ADDRESS_DIR.
Each client runs WORKERS loops of one query per call. A call that gives no answer of topk
rows is a failed call; an exception out of a client (e.g. IndexError on an empty address
folder) is a crash: the script prints it and exits 1.
Usage: lifecycle.py CLIENTS_DIR ADDRESS_DIR HOST:PORT QUERIES_JSON STOP_FILE WORKERS
-> prints {"verl": {"ok": n, "failed": m}, "rlinf": {...}, "asearcher": {...}} as JSON."""
import asyncio
import contextlib
import json
import os
import sys
import threading
import types

import asearcher
import trainers

clients_dir, address_dir, host_port, queries_file, stop_file, workers = sys.argv[1:7]
workers = int(workers)
with open(queries_file) as f:
    queries = json.load(f)


verl = trainers.verl(clients_dir)
rlinf = trainers.rlinf(clients_dir)

stats = {name: {"ok": 0, "failed": 0} for name in ("verl", "rlinf", "asearcher")}
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


async def rlinf_loop(client, i):
    n = i
    while not os.path.exists(stop_file):
        result = await client.query_async({"queries": [queries[n % len(queries)]], "topk": 5, "return_scores": False})
        count("rlinf", len(result[0]["documents"]) == 5)
        n += workers


async def asearcher_loop(i):
    client = asearcher.AddressDirClient(address_dir)
    n = i
    while not os.path.exists(stop_file):
        count("asearcher", len(await client.retrieve(queries[n % len(queries)])) == 5)
        n += workers


async def main():
    cfg = types.SimpleNamespace(tools=types.SimpleNamespace(search=types.SimpleNamespace(server_addr=host_port)))
    client = rlinf.AsyncSearchClient(cfg)
    threads = [threading.Thread(target=verl_loop, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    await asyncio.gather(*[rlinf_loop(client, i) for i in range(workers)], *[asearcher_loop(i) for i in range(workers)])
    for t in threads:
        t.join()


with contextlib.redirect_stdout(sys.stderr):  # RLinf's client prints; stdout is for the result
    asyncio.run(main())
if crashes:
    sys.exit(1)
json.dump(stats, sys.stdout)
