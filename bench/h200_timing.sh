#!/usr/bin/env bash
# One device call (about 9 minutes) on the lent H100/H200 for timings, one thing at a time on the GPU:
# (1) porter's OpenCL kernels against the CUDA originals at the Rodinia programs' own launches
#     (bench/opencl_kernel_speed.py: porter capture with nvcc, porter bench --capture --exclusive);
# (2) porter lift's kernels of the loop-nest collection against CuPy/cuBLAS and NumPy
#     (bench/lift_collection_gpu.py);
# (3) Rodinia programs' wall times: CUDA original, porter's OpenCL program, the suite's hand-written
#     OpenCL (bench/h200_opencl_programs.sh), its folder packed as ocl.tgz.
# Usage there:  bash bench/h200_timing.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/h200_env.sh || exit 1
mkdir -p /tmp/icd-nv && cp /tmp/icd/nvidia.icd /tmp/icd-nv/  # NVIDIA's OpenCL alone: PoCL's CPU would be timed too
OCL_ICD_VENDORS=/tmp/icd-nv timeout 200 python3 bench/opencl_kernel_speed.py --corpus .corpus --toolchain nvcc --backend cuda --backend opencl \
    --gpu-only --gpu-sizes --timeout 100 --json "$OUT/ocl_speed.json" >"$OUT/ocl_speed.md" 2>"$OUT/ocl_speed.err"
tail -4 "$OUT/ocl_speed.md"
timeout 170 python3 bench/lift_collection_gpu.py --json "$OUT/lift_collection_gpu.json" >"$OUT/lift_collection_gpu.md" 2>"$OUT/lift_collection_gpu.err"
tail -3 "$OUT/lift_collection_gpu.md"
ONLY=${ONLY:-"lud backprop lavaMD gaussian"} timeout 90 bash bench/h200_opencl_programs.sh 45 >/dev/null 2>&1
tar czf "$OUT/logs.tgz" --exclude='*.cap' -C "$OUT" ocl -C /tmp porter-ocl-speed 2>/dev/null; rm -rf "$OUT/ocl"
