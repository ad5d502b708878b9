# needle's front door. `make run` and `make test` set up a fresh machine themselves.
#   make setup   system packages, FAISS's source, Python venv (reference scripts), MiniLM model,
#                the Milvus standalone server (PyPI milvus==2.3.5, for the Milvus backend tests)
#   make native  FAISS (tools/faiss.sh, cached), then CMake: PTX, libneedle.so and C kernel tests into build/native
#   make build   bin/needle
#   make test    everything above, then ctest and all Go tests (fuzz seeds included)
#   make run     build the WordNet demo index with MiniLM (cached) and serve it on :8000
#   make bench   kernels, docstore and encoder benchmarks (no large download; PyTorch baselines
#                under bench/ are run by hand)
#   make dist    the manylinux wheel users install with pip (dist/needle_rl-*.whl; docs/install.md)
#   make wheelproof  that wheel installed and run in a clean Debian root (the last step of make test)

SHELL        := /bin/bash
NEEDLE_CACHE ?= $(HOME)/.cache/needle
NATIVE       := build/native
GO           ?= go
export NEEDLE_CACHE
export NEEDLE_MODEL  := $(NEEDLE_CACHE)/models/all-MiniLM-L6-v2
# Go's build cache keys a cgo package by the files of its own folder: a header it includes from
# another one (kernels/linalg/dotmm/dotmm_vec.h, platform/cpu/cpu.h) is not part of the key, so
# editing it left stale objects in every user. The hash of all C headers joins the C flags.
C_HEADERS_HASH := $(shell find kernels platform cuda capi -name '*.h' | sort | xargs cat | sha1sum | cut -c1-12)
export CGO_CFLAGS ?= -O2 -g
CGO_CFLAGS += -DNEEDLE_C_HEADERS=$(C_HEADERS_HASH)
# The same for FAISS: faissgo's objects and the link name build/native/faiss, whatever prefix it
# points to; the prefix's name (version and hash of its inputs) joins the key, read when a recipe
# runs (after `make native` set the link).
CGO_CFLAGS += -DNEEDLE_FAISS=$(notdir $(realpath $(NATIVE)/faiss))

.PHONY: setup native build test run bench clean gpucheck dist wheelproof

setup:
	bash tools/setup.sh

native:
	mkdir -p $(NATIVE) && prefix="$$(bash tools/faiss.sh dev)" && ln -sfn "$$prefix" $(NATIVE)/faiss
	cmake -S . -B $(NATIVE) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(NATIVE) -j2

build: native
	$(GO) build -o bin/needle ./cmd/needle

# The second pass runs the test binaries that link OpenBLAS (through faissgo or blascore:
# computed from `go list -test`, never hand-listed) under the other choice of its kernels: with
# OPENBLAS_CORETYPE unset where the environment sets it, else Haswell (as some Zen 5 hosts set
# it). No result may depend on a BLAS's blocking; the encoder, the flat scan and the fused logprob
# call no BLAS at all. OMP_WAIT_POLICY=PASSIVE: two test binaries share the cores, and OpenMP
# threads (FAISS's, the fused logprob's) that spin while waiting take them from each other
# (a FAISS training test ran 5.6x slower spinning on a loaded machine; results are the same).
# -p 4: four test binaries at once on two cores, so that the ones that mostly wait (Milvus's
# starts and leases, the e2e clients' 10 s retry intervals) do not hold a core's slot (quiet
# machine: both passes 511 s at the default -p 2, 384 s at -p 4).
BLAS_PKGS = $$($(GO) list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... | \
  awk '$$1 ~ /\.test$$/ && / needle\/(faissgo|platform\/blascore)( |$$)/ {sub(/\.test$$/, "", $$1); print $$1}')
test: setup build
	ctest --test-dir $(NATIVE) --output-on-failure
	OMP_WAIT_POLICY=PASSIVE NEEDLE_STRICT=1 $(GO) test -p 4 -count=1 -timeout 40m ./...
	if [ -n "$$OPENBLAS_CORETYPE" ]; then other="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"; \
	  else other="env OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512"; fi; \
	  pkgs="$(BLAS_PKGS)"; echo "test: again under $$other: $$pkgs" >&2; \
	  $$other OMP_WAIT_POLICY=PASSIVE NEEDLE_STRICT=1 $(GO) test -p 4 -count=1 -timeout 40m $$pkgs
	bash tools/wheel/dist.sh
	bash tools/wheel/proof.sh

run: setup build
	bash tools/demo.sh

bench: setup build
	bin/needle bench kernels
	bin/needle bench docstore
	bin/needle bench encode --model $(NEEDLE_MODEL)

clean:
	rm -rf build bin dist

# The wheel (tools/wheel, docs/install.md): FAISS built statically by zig once (tools/faiss.sh wheel,
# cached in NEEDLE_CACHE), the binary and libneedle.so linked for glibc 2.28, auditwheel repair.
dist: native
	bash tools/wheel/dist.sh

wheelproof: build dist
	bash tools/wheel/proof.sh

# The GPU check (../shared/GPU.md): everything a GPU machine without Go, FAISS or OpenBLAS needs,
# in one ignored folder to carry there; run it with `python3 gpucheck/gpucheck.py OUTDIR`.
# Everything but the scripts travels xz-compressed (60 MiB at most, checked; gpucheck.py unpacks it);
# pack_libs.py records which symbol versions they need, so that gpucheck.py uses the machine's
# own libraries where they have them. The clang PTX travels for ptxas, needle_trainer with its
# tests and libneedle.so for the Python CUDA path, pytest (from the venv, pinned) to run them.
GPUCHECK_LD := -ldflags='-s -w'
GPUCHECK_TESTS := cuda kernels/trainer/logprob kernels/trainer/delta index/flatgpu encoder/bert
VENV_PY := $(NEEDLE_CACHE)/venv/bin/python
gpucheck: native
	rm -rf gpucheck && mkdir -p gpucheck/ptx gpucheck/python gpucheck/pylib gpucheck/bert
	for p in $(GPUCHECK_TESTS); do $(GO) test -c $(GPUCHECK_LD) -o gpucheck/$$(basename $$p).test ./$$p || exit 1; done
	$(GO) build -tags noplot $(GPUCHECK_LD) -o gpucheck/needle ./cmd/needle  # no plot fonts (~5 MB): bench/plot/noplot.go
	cp -r encoder/bert/testdata gpucheck/bert/
	head -c 500000 /usr/share/wordnet/data.noun > gpucheck/data.noun
	$(VENV_PY) tools/gpucheck/half_model.py $(NEEDLE_MODEL) gpucheck/cache/models/all-MiniLM-L6-v2 \
	  gpucheck/data.noun encoder/bert/testdata/*.jsonl  # zero rows for the tokens no carried text uses
	xz -9 -T2 gpucheck/data.noun
	cp kernels/*/*/ptx/*_sm80.ptx gpucheck/ptx/
	cp $(NATIVE)/libneedle.so gpucheck/
	tar -C python --exclude __pycache__ -cf - needle_trainer tests | tar -C gpucheck/python -xf -
	sp=$$($(VENV_PY) -c 'import pytest, os; print(os.path.dirname(os.path.dirname(pytest.__file__)))') && \
	  tar -C $$sp --exclude __pycache__ -cf - pytest _pytest pluggy iniconfig packaging py.py | tar -C gpucheck/pylib -xf -
	python3 tools/gpucheck/pack_libs.py gpucheck gpucheck/*.test gpucheck/needle gpucheck/libneedle.so
	cp tools/gpucheck/gpucheck.py gpucheck/
	xz --x86 --lzma2=preset=6 -T2 gpucheck/*.test gpucheck/needle gpucheck/libneedle.so  # BCJ: 6% smaller code
	xz -6 -T2 gpucheck/ptx/* gpucheck/bert/testdata/* gpucheck/cache/models/all-MiniLM-L6-v2/{tokenizer.json,vocab.txt}
	xz -T2 --lzma2=preset=9e,lc=0,lp=1,pb=1 gpucheck/cache/models/all-MiniLM-L6-v2/model.safetensors  # 2-byte fp16: 1.9 MB smaller
	find gpucheck/pylib gpucheck/python -type f -exec xz -6 {} +
	@size=$$(du -sb gpucheck | cut -f1); echo "gpucheck: $$((size / 1048576)) MiB"; \
	  if [ $$size -gt 62914560 ]; then echo "gpucheck: over 60 MiB (the device tool carries 64 MiB with the tree)" >&2; exit 1; fi
