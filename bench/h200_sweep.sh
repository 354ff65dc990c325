#!/usr/bin/env bash
# One device call (about 9 minutes) on the lent H100/H200 for correctness: install porter (the wheels in
# .whl/, carried), register NVIDIA's OpenCL, then side by side (1) the gpu-marked tests (pytest-xdist) and
# (2) the development corpus (.corpus/, carried) ported to HIP and OpenCL, built and run as programs,
# every kernel replayed from the GPU's capture (bench/corpus_programs.py --jobs).  Results under $OUT as
# they come: gpu.txt, pytest-gpu.log, corpus_h200.md, corpus_h200.json.gz (the per-program reports).
# Timing runs belong in bench/h200_timing.sh: here the GPU is shared.
# Usage there:  bash bench/h200_sweep.sh [seconds for the whole call, default 560]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LIMIT=${1:-560}
source bench/h200_env.sh || exit 1
( timeout $((LIMIT - 60)) python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 --timeout 240 >"$OUT/pytest-gpu.log" 2>&1 ) &
timeout $((LIMIT - 40)) python3 bench/corpus_programs.py --corpus .corpus --timeout 60 --jobs 6 --out /tmp/porter-corpus \
    --to hip,opencl --toolchains nvcc,hip-on-cuda,opencl --json "$OUT/corpus_h200.json.gz" >"$OUT/corpus_h200.md" 2>&1
wait
tail -3 "$OUT/pytest-gpu.log"; tail -8 "$OUT/corpus_h200.md"
