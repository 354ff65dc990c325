#!/usr/bin/env bash
# One short call on the lent H200 for OpenCL programs (issue #30): install porter (bench/run_h200.sh with
# the NVIDIA OpenCL GPU tests), the bundled sample ported to HIP and OpenCL and run natively, then Rodinia
# programs timed (bench/h200_opencl_programs.sh).  Results under $OUT as they come.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 120 bash bench/run_h200.sh tests/backends/test_opencl_gpu.py --timeout 100 -q >"$OUT/opencl_gpu_tests.txt" 2>&1
export PYTHONPATH=/tmp/site:${PYTHONPATH:-} PORTER_CACHE_DIR=/tmp/porter-cache OCL_ICD_VENDORS=/tmp/icd
timeout 150 python3 -m porter port samples/programs/smooth --to hip,opencl --toolchains nvcc,hip-on-cuda,opencl \
    --run "./smooth data/values.txt 4" --out /tmp/smooth-port >"$OUT/smooth.txt" 2>&1
tail -8 "$OUT/smooth.txt"
ONLY=${ONLY:-"gaussian pathfinder nw"} timeout "${ROD_S:-240}" bash bench/h200_opencl_programs.sh 90
