"""ASearcher's retrieval client (AReaL's AsyncSearchBrowserClient in ASearcher/utils/search_utils.py),
restated from the facts of its code because no package registry ships it (PyPI areal 1.0.4 and
realhf 0.3.0 lack it): the server list is every line of the DIR/Host*_IP*.txt files (read with
readlines, not stripped); the constructor picks one with random.choice; a call posts with a new
aiohttp session and a 120 s timeout, and on ANY exception re-reads the folder and picks again
with random.choice OUTSIDE its try (an empty folder raises IndexError out of the call), sleeps
10 s and tries again, 10 attempts in all. ONE query per request, topk 5, return_scores false;
reads r["contents"] and r["url"].
Usage: asearcher.py ADDRESS_DIR QUERIES_JSON_FILE URLS_JSON_FILE
-> prints {"retrieve": [[{"contents","url"}...] per query], "access": [...]} as JSON."""
import asyncio
import glob
import json
import os
import random
import sys

import aiohttp

RETRY_SLEEP = 10  # seconds, as the client


class AddressDirClient:
    def __init__(self, address_dir):
        self.address_dir = address_dir
        self.failed_attempts = 0  # not the client's: what lifecycle.py reports of its retries
        self.server_addr = random.choice(self.server_list())  # IndexError on an empty folder

    def server_list(self):
        servers = []
        for name in glob.glob(self.address_dir + "/Host*_IP*.txt"):
            try:
                with open(name) as f:
                    servers.extend(f.readlines())
            except OSError:
                continue
        return servers

    async def post(self, path, payload):
        last = None
        for _ in range(10):
            try:
                async with aiohttp.ClientSession() as session:
                    async with session.post(f"http://{self.server_addr}{path}", json=payload,
                                            timeout=aiohttp.ClientTimeout(total=120, sock_connect=120)) as resp:
                        resp.raise_for_status()
                        return await resp.json()
            except Exception as e:  # noqa: BLE001 (the client catches everything)
                last = e
                self.failed_attempts += 1
            self.server_addr = random.choice(self.server_list())  # outside the try, as the client
            await asyncio.sleep(RETRY_SLEEP)
        raise RuntimeError("Fail to post to RAG server") from last

    async def retrieve(self, query):
        res = await self.post("/retrieve", {"queries": [query], "topk": 5, "return_scores": False})
        return [{"contents": r["contents"], "url": r["url"]} for r in res["result"][0]]


async def main():
    address_dir = sys.argv[1]
    with open(sys.argv[2]) as f:
        queries = json.load(f)
    with open(sys.argv[3]) as f:
        urls = json.load(f)
    client = AddressDirClient(address_dir)
    retrieved = await asyncio.gather(*[client.retrieve(q) for q in queries])
    access = (await client.post("/access", {"urls": urls}))["result"]
    json.dump({"retrieve": retrieved, "access": access}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
