"""By hand: N Python client threads (requests, one query per call, each sending its next when
answered) against a needle or anchor /retrieve until killed: the clients of a fairness run that
share the server's cores, as a Python rollout's do. Queries from the line `--skip` of the file
on, so that they repeat no POST's texts taken from its start.

    ~/.cache/needle/venv/bin/python bench/python_singles.py URL/retrieve queries.jsonl [--threads 8] [--skip 3000]
"""
import argparse
import json
import threading

import requests


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url")
    p.add_argument("queries")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--skip", type=int, default=3000)
    a = p.parse_args()
    qs = [json.loads(line)["query"] for line in open(a.queries)][a.skip:]

    def run(t):
        s = requests.Session()
        for i in range(t, 1 << 62, a.threads):
            s.post(a.url, json={"queries": [qs[i % len(qs)]], "topk": 3, "return_scores": True}).json()

    for t in range(a.threads):
        threading.Thread(target=run, args=(t,), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
