#!/usr/bin/env bash
# By hand: the replicas-across-hosts rehearsal (e2e/replicas_test.go: 2 replica hosts and a client host in
# network namespaces, 1 Gbit/s links; a SIGKILL of replica A and its restart, then a 20 s cut of A's link)
# with the real clients' own files instead of e2e/clients' restatements. No registry ships them: fetch them
# from their repositories first.
#   ASEARCHER: AReaL's ASearcher/utils/search_utils.py (AsyncSearchBrowserClient; needs aiohttp and requests)
#   SEARCHR1:  search_r1/llm_agent/generation.py in a Search-R1 checkout (LLMGenerationManager.batch_search,
#              imported from the checkout: needs torch and the requirements of the verl it vendors)
# Either may be "-" to keep its restatement. PYTHON: an interpreter with those requirements (default: make
# setup's venv, which has aiohttp and requests). Needs root (namespaces), haproxy and `make setup`'s cache.
# Usage: bench/replicas_real_clients.sh ASEARCHER SEARCHR1
# Prints the test's figures (file removal times, failed calls, slowest calls, longest stall).
set -euo pipefail
if [ $# -ne 2 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
real() { if [ "$1" = "-" ]; then echo ""; else realpath "$1"; fi; }
NEEDLE_ASEARCHER_CLIENT="$(real "$1")" NEEDLE_SEARCHR1_CLIENT="$(real "$2")" NEEDLE_CLIENTS_PYTHON="${PYTHON:-}" NEEDLE_STRICT=1 \
  go test -count=1 -timeout 20m -run '^TestReplicasAcrossHosts$' -v ./e2e
