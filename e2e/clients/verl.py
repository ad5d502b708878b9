"""verl 0.5.0's own call_search_api (trainers.py) from CALLERS threads at once, one query per
call as verl's search tool makes them: requests, 30 s timeout, 10 attempts on 500/502/503/504
and connection errors. It returns (None, error) after the last attempt; that is a failure here.
Usage: verl.py CLIENTS_DIR URL QUERIES_JSON_FILE CALLERS -> prints the result lists as JSON."""
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import trainers

clients_dir, url, queries_file, callers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
verl = trainers.verl(clients_dir)
with open(queries_file) as f:
    queries = json.load(f)


def call(query):
    result, err = verl.call_search_api(url + "/retrieve", [query], topk=3, return_scores=True)
    if err is not None:
        raise RuntimeError(f"query {query!r}: {err}")
    return result["result"][0]


with ThreadPoolExecutor(max_workers=callers) as pool:
    json.dump(list(pool.map(call, queries)), sys.stdout)
