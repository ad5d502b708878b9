#!/usr/bin/env bash
# A clean Debian root for the wheel's proof (proof.sh): `debootstrap --variant=minbase` from the
# Debian mirror this machine's apt uses, plus only python3 and its venv module (what a user's
# machine has: no Go, no compiler, no FAISS, no OpenBLAS). Cached under NEEDLE_CACHE/wheel by
# the hash of its inputs, and never written to afterwards: proof.sh works in a copy.
# Prints the root's path. Needs root (debootstrap, chroot).
set -euo pipefail
CACHE="${NEEDLE_CACHE:-$HOME/.cache/needle}"
suite="$(. /etc/os-release && echo "$VERSION_CODENAME")"
# The mirror: a one-line `deb URL SUITE` entry, else the first deb822 entry that has the suite.
mirror=""
if [ -f /etc/apt/sources.list ]; then
  mirror="$(awk -v s="$suite" '$1 == "deb" && $3 == s {print $2; exit}' /etc/apt/sources.list)"
fi
if [ -z "$mirror" ]; then
  mirror="$(cat /etc/apt/sources.list.d/*.sources | awk -v s="$suite" '
    /^$/ {deb = 0; uri = ""; suites = ""}
    /^Types:/ {deb = / deb( |$)/}
    /^URIs:/ {uri = $2}
    /^Suites:/ {suites = $0}
    deb && uri != "" && suites ~ (" " s "( |$)") {print uri; exit}')"
fi
[ -n "$mirror" ] || { echo "wheel: no apt mirror for $suite in /etc/apt" >&2; exit 1; }
include=python3,python3-venv,ca-certificates
key="$( (cat "$0"; echo "$suite $mirror $include") | sha256sum | cut -c1-16)"
ROOTFS="$CACHE/wheel/root-$key"
if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
  echo "wheel: debootstrap --variant=minbase $suite from $mirror into $ROOTFS" >&2
  start=$SECONDS
  rm -rf "$ROOTFS.tmp"
  debootstrap --variant=minbase --include="$include" "$suite" "$ROOTFS.tmp" "$mirror" >/dev/null
  rm -rf "$ROOTFS.tmp/var/cache/apt/archives"/*.deb
  mv "$ROOTFS.tmp" "$ROOTFS"
  echo "wheel: clean root made in $((SECONDS - start)) s" >&2
fi
echo "$ROOTFS"
