#!/usr/bin/env bash
# make wheelproof (the last step of make test): the wheel in dist/ installed and run as a user
# would, in a clean Debian root (root.sh: no Go, no compiler, no FAISS, no OpenBLAS), entered with
# chroot as an unprivileged user with an empty environment. proof_user.py does the steps inside;
# this script checks the wheel's ELF files from outside, makes the reference answers with the
# `make build` binary, sets the root up and prints the proof's own time. Needs root.
set -euo pipefail
start=$SECONDS
source "$(dirname "$0")/toolchain.sh"
ROOT="$(cd "$WHEEL_DIR/../.." && pwd)"
cd "$ROOT"
whl="$(ls -t dist/needle_rl-*manylinux*.whl 2>/dev/null | head -1)"
[ -n "$whl" ] || { echo "wheelproof: no wheel in dist/; run make dist" >&2; exit 1; }
[ -x bin/needle ] || { echo "wheelproof: no bin/needle; run make build" >&2; exit 1; }
WORK="$ROOT/build/wheel/proof"
rm -rf "$WORK"
mkdir -p "$WORK/data"

# 1. The wheel from outside: its policy, and every ELF file's needs.
"$WHEEL_VENV/bin/auditwheel" show "$whl" | tr '\n' ' ' | sed 's/  */ /g; s/^/wheelproof: auditwheel show: /'; echo
"$WHEEL_VENV/bin/python" -m zipfile -e "$whl" "$WORK/unpacked"
fail=0
while IFS= read -r f; do
  newest="$(readelf -V --wide "$f" | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1)"
  needed="$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
  echo "wheelproof: $(basename "$f"): newest $newest; needs $needed"
  if [ "$(printf '%s\nGLIBC_2.28\n' "$newest" | sort -V | tail -1)" != GLIBC_2.28 ]; then
    echo "wheelproof: FAIL $f needs $newest (> GLIBC_2.28)"; fail=1
  fi
  if [[ "$needed" == *libstdc++* || "$needed" == *libgomp* || "$needed" == *libopenblas* ]]; then
    echo "wheelproof: FAIL $f needs a library of the build machine: $needed"; fail=1
  fi
done < <(find "$WORK/unpacked" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)

# 2. The inputs: 2,000 WordNet passages and queries, MiniLM, the trainer's tests, offline wheels.
go run ./tools/wordnet --limit 2000 --out "$WORK/data" >/dev/null
cp -r "${NEEDLE_MODEL:-$CACHE/models/all-MiniLM-L6-v2}" "$WORK/data/model"
cp build/native/testkit/cudaemu/libcudaemu_driver.so "$WORK/data/cudaemu.so"  # the emulated CUDA driver
tar -C python --exclude __pycache__ -cf - tests | tar -C "$WORK/data" -xf -
ROOTFS="$(bash "$WHEEL_DIR/root.sh")"
pyver="$(chroot "$ROOTFS" /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
PYW="$WHEEL_CACHE/pywheels-$( (cat "$WHEEL_DIR/proof-requirements.txt"; echo "$pyver") | sha256sum | cut -c1-16)"
if [ ! -d "$PYW" ]; then
  "$WHEEL_VENV/bin/pip" download -q --disable-pip-version-check --only-binary=:all: --python-version "$pyver" \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$PYW.tmp" -r "$WHEEL_DIR/proof-requirements.txt"
  mv "$PYW.tmp" "$PYW"
fi

# 3. The reference: the same steps with the make-build binary on this machine.
t=$SECONDS
python3 "$WHEEL_DIR/proof_user.py" answers "$ROOT/bin/needle" "$WORK/data" "$WORK/reference" "$WORK/reference.json"
echo "wheelproof: reference answers of bin/needle in $((SECONDS - t)) s"

# 4. The clean root (a copy; the cached one stays clean), a user, the inputs, chroot.
RUN="$WORK/root"
cp -a "$ROOTFS" "$RUN"
echo "proof:x:1000:1000::/home/proof:/bin/sh" >> "$RUN/etc/passwd"
echo "proof:x:1000:" >> "$RUN/etc/group"
mkdir -p "$RUN/home/proof" "$RUN/proof/wheels"
cp -r "$WORK/data" "$RUN/proof/data"
cp "$whl" "$PYW"/*.whl "$RUN/proof/wheels/"
cp "$WORK/reference.json" "$WHEEL_DIR/proof_user.py" "$RUN/proof/"
chown -R 1000:1000 "$RUN/home/proof"
mount -t proc proc "$RUN/proc"
trap 'umount "$RUN/proc" 2>/dev/null || true' EXIT
set +e
chroot --userspec=1000:1000 "$RUN" /usr/bin/env -i HOME=/home/proof PATH=/usr/bin:/bin LANG=C.UTF-8 \
  /usr/bin/python3 /proof/proof_user.py check /proof/data /proof/wheels /proof/reference.json
rc=$?
set -e
umount "$RUN/proc"
trap - EXIT
rm -rf "$RUN"
if [ $rc -ne 0 ] || [ $fail -ne 0 ]; then
  echo "wheelproof: FAIL ($rc steps inside, ELF checks $fail) in $((SECONDS - start)) s"
  exit 1
fi
echo "wheelproof: PASS in $((SECONDS - start)) s"
