"""ASearcher's call pattern (AReaL/ASearcher/utils/search_utils.py): the server is found
through the address folder (file read without stripping), ONE query per request, topk 5,
return_scores false, aiohttp with a new session per call, 120 s timeout, up to 10 attempts;
reads r["contents"] and r["url"]. Then /access for the given urls.
Usage: asearcher.py ADDRESS_DIR QUERIES_JSON_FILE URLS_JSON_FILE
-> prints {"retrieve": [[{"contents","url"}...] per query], "access": [...]} as JSON."""
import asyncio
import json
import os
import random
import sys

import aiohttp


def server_address(address_dir):
    files = [f for f in os.listdir(address_dir) if f.endswith(".txt")]
    with open(os.path.join(address_dir, random.choice(files))) as f:
        return f.read()  # the anchors' clients do not strip


async def post(address_dir, path, payload):
    for attempt in range(10):
        try:
            timeout = aiohttp.ClientTimeout(total=120)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(f"http://{server_address(address_dir)}{path}", json=payload) as resp:
                    resp.raise_for_status()
                    return await resp.json()
        except Exception:
            if attempt == 9:
                raise
            await asyncio.sleep(1)


async def main():
    address_dir = sys.argv[1]
    with open(sys.argv[2]) as f:
        queries = json.load(f)
    with open(sys.argv[3]) as f:
        urls = json.load(f)
    results = await asyncio.gather(*[
        post(address_dir, "/retrieve", {"queries": [q], "topk": 5, "return_scores": False}) for q in queries])
    retrieved = [[{"contents": r["contents"], "url": r["url"]} for r in res["result"][0]] for res in results]
    access = (await post(address_dir, "/access", {"urls": urls}))["result"]
    json.dump({"retrieve": retrieved, "access": access}, sys.stdout)


asyncio.run(main())
