"""Search-R1's retrieval call (search_r1/llm_agent/generation.py: _batch_search, batch_search and
_passages2string), restated because no package registry ships Search-R1: ONE POST per turn
carrying every active rollout's query, return_scores true, requests.post with no timeout and no
retry, then .json()["result"], and each hit's ["document"]["contents"] split into title and text.
A refused connection, a 503 body or any other shape raises, and the trainer's step ends.
Usage: searchr1.py URL QUERIES_JSON_FILE TOPK  -> prints the result lists as JSON."""
import json
import sys

import requests


def batch_search(url, queries, topk):
    """The POST of one turn: the result lists, one per query."""
    payload = {"queries": queries, "topk": topk, "return_scores": True}
    return requests.post(url + "/retrieve", json=payload).json()["result"]


def passages2string(result):
    """What the rollout sees of one query's hits."""
    reference = ""
    for idx, doc_item in enumerate(result):
        content = doc_item["document"]["contents"]
        title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
        reference += f"Doc {idx + 1}(Title: {title}) {text}\n"
    return reference


if __name__ == "__main__":
    url, queries_file, topk = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(queries_file) as f:
        queries = json.load(f)
    result = batch_search(url, queries, topk)
    for r in result:
        passages2string(r)
    json.dump(result, sys.stdout)
