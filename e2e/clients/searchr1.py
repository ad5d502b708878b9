"""Search-R1's call pattern (search_r1/llm_agent/generation.py): ONE POST carrying every
rollout's query, return_scores true, requests, no timeout, no retry, .json().
Usage: searchr1.py URL QUERIES_JSON_FILE TOPK  -> prints the .json() result as JSON."""
import json
import sys

import requests

url, queries_file, topk = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(queries_file) as f:
    queries = json.load(f)
payload = {"queries": queries, "topk": topk, "return_scores": True}
result = requests.post(url + "/retrieve", json=payload).json()["result"]
json.dump(result, sys.stdout)
