"""The clients of the replicas test (e2e/replicas_test.go), timing every call, until STOP_FILE exists:
- ASearcher's client in WORKERS loops of one query per call (topk 5, return_scores false), each loop
  one client object that picks its server from ADDRESS_DIR: asearcher.py's restatement, or with
  --asearcher FILE the real one (AReaL's ASearcher/utils/search_utils.py: AsyncSearchBrowserClient,
  which reads the folder from $RAG_SERVER_ADDR_DIR);
- Search-R1's call in one loop of TURN-query POSTs to FRONT_URL (no timeout, no retry): searchr1.py's
  restatement, or with --searchr1 FILE the real one (search_r1/llm_agent/generation.py of a Search-R1
  checkout: LLMGenerationManager.batch_search, imported as its package's module, so the interpreter
  needs Search-R1's requirements: torch and those of the verl it vendors).
Each call is [client, start, end, error] (seconds since the epoch; error null, or what the client
raised: ASearcher's gives up after 10 attempts, or raises IndexError on an empty folder; Search-R1's
raises on any failure, which would end a training step). Turns are distinct texts (a turn counter in
each query), so that every POST is encoded, not answered from the result cache.
Usage: replicas.py ADDRESS_DIR FRONT_URL QUERIES_JSON STOP_FILE WORKERS TURN [--asearcher FILE] [--searchr1 FILE]
-> prints {"calls": [...]} as JSON."""
import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import sys
import threading
import time
import types

parser = argparse.ArgumentParser()
for name in ("address_dir", "front_url", "queries_file", "stop_file"):
    parser.add_argument(name)
parser.add_argument("workers", type=int)
parser.add_argument("turn", type=int)
parser.add_argument("--asearcher", help="the real ASearcher/utils/search_utils.py")
parser.add_argument("--searchr1", help="the real search_r1/llm_agent/generation.py")
args = parser.parse_args()
with open(args.queries_file) as f:
    queries = json.load(f)

calls = []
lock = threading.Lock()


def asearcher_client():
    """A client object and its call of one query -> the number of rows it got."""
    if args.asearcher is None:
        import asearcher
        client = asearcher.AddressDirClient(args.address_dir)
        return (lambda q: client.retrieve(q)), len
    os.environ["RAG_SERVER_ADDR_DIR"] = args.address_dir
    spec = importlib.util.spec_from_file_location("search_utils", args.asearcher)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    client = module.AsyncSearchBrowserClient()
    return (lambda q: client.query_async({"queries": [q], "topk": 5, "return_scores": False}),
            lambda res: len(res[0]["documents"]))


def searchr1_call():
    """Search-R1's call of one turn -> the passages strings, one per query."""
    if args.searchr1 is None:
        import searchr1
        return lambda turn: [searchr1.passages2string(r) for r in searchr1.batch_search(args.front_url, turn, 3)]
    # generation.py imports its package's modules: import it from its checkout's root.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args.searchr1)))))
    generation = importlib.import_module("search_r1.llm_agent.generation")
    manager = object.__new__(generation.LLMGenerationManager)
    manager.config = types.SimpleNamespace(search_url=args.front_url + "/retrieve", topk=3)
    return manager.batch_search


def record(client, start, error):
    with lock:
        calls.append([client, start, time.time(), error])


async def asearcher_loop(i):
    call, rows = asearcher_client()
    n = i
    while not os.path.exists(args.stop_file):
        start = time.time()
        try:
            got = rows(await call(queries[n % len(queries)]))
            record("asearcher", start, None if got == 5 else f"{got} rows, want 5")
        except Exception as e:  # noqa: BLE001 (the rollout would end here)
            record("asearcher", start, repr(e))
        n += args.workers


def searchr1_loop():
    call = searchr1_call()
    n = 0
    while not os.path.exists(args.stop_file):
        turn = [f"{queries[(n + j) % len(queries)]} ({n // args.turn})" for j in range(args.turn)]
        start = time.time()
        try:
            got = call(turn)
            ok = len(got) == args.turn and all(p.count("Doc ") == 3 for p in got)
            record("searchr1", start, None if ok else f"{len(got)} answers, want {args.turn} of 3 passages")
        except Exception as e:  # noqa: BLE001 (the training step would end here)
            record("searchr1", start, repr(e))
        n += args.turn


async def main():
    thread = threading.Thread(target=searchr1_loop)
    thread.start()
    await asyncio.gather(*[asearcher_loop(i) for i in range(args.workers)])
    thread.join()


with contextlib.redirect_stdout(sys.stderr):  # the real clients print; stdout is for the result
    asyncio.run(main())
json.dump({"calls": calls}, sys.stdout)
