"""verl's call pattern (verl/tools/utils/search_r1_like_utils.py): up to 120 concurrent
callers, requests with a 30 s timeout, 10 retries on 500/502/503/504 and connection
errors, return_scores true.
Usage: verl.py URL QUERIES_JSON_FILE CALLERS -> prints {"results": [...], "retries": n}."""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import requests

url, queries_file, callers = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(queries_file) as f:
    queries = json.load(f)
retries = 0


def call(query):
    global retries
    payload = {"queries": [query], "topk": 3, "return_scores": True}
    for attempt in range(10):
        try:
            resp = requests.post(url + "/retrieve", json=payload, timeout=30)
            if resp.status_code in (500, 502, 503, 504):
                retries += 1
                time.sleep(0.2 * (attempt + 1))
                continue
            resp.raise_for_status()
            return resp.json()["result"][0]
        except requests.exceptions.ConnectionError:
            retries += 1
            time.sleep(0.2 * (attempt + 1))
    raise RuntimeError(f"query {query!r}: no answer after 10 attempts")


with ThreadPoolExecutor(max_workers=callers) as pool:
    results = list(pool.map(call, queries))
json.dump({"results": results, "retries": retries}, sys.stdout)
