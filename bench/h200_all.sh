#!/usr/bin/env bash
# Everything of bench/h200_sweep.sh and bench/h200_timing.sh in one device call (when a lease may not
# last for two): first the timings one at a time on the idle GPU (barrier fences, lift collection, OpenCL
# kernels against CUDA), then the correctness work side by side (corpus sweep, gpu tests) for SWEEP_S
# seconds.  Results under $OUT as they come.
# Usage there:  SWEEP_S=300 [SPEED_S=150 LIFT_S=100 GPU_TESTS=0 JOBS=8 ONLY=a,b SPEED_ONLY=c,d LIFT_ONLY=e,f] bash bench/h200_all.sh
# (SWEEP_S=0: timings only; LIFT_S=0 / SPEED_S=0 / FENCE=0: no lift timings / OpenCL kernel timings / barrier
# fence; GPU_TESTS=0: no pytest -m gpu beside the sweep)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SWEEP_S=${SWEEP_S:-300}
GPU_TESTS=${GPU_TESTS:-1}  # 0: the corpus sweep alone gets the machine's cores
ONLY=${ONLY:+--only $ONLY}  # programs of the sweep (default: all)
source bench/h200_env.sh || exit 1
mkdir -p /tmp/icd-nv && cp /tmp/icd/nvidia.icd /tmp/icd-nv/
[ "${FENCE:-1}" = 1 ] && OCL_ICD_VENDORS=/tmp/icd-nv timeout 60 python3 bench/opencl_barrier_fence.py >"$OUT/ocl_fence.md" 2>&1
[ "${LIFT_S:-100}" -gt 0 ] && timeout "${LIFT_S:-100}" python3 bench/lift_collection_gpu.py --repeat 5 --limit 6 ${LIFT_ONLY:+--only $LIFT_ONLY} --json /tmp/lift_collection_gpu.json \
    >"$OUT/lift_collection_gpu.md" 2>/dev/null
tail -3 "$OUT/lift_collection_gpu.md"
[ "${SPEED_S:-150}" -gt 0 ] && OCL_ICD_VENDORS=/tmp/icd-nv timeout "${SPEED_S:-150}" python3 bench/opencl_kernel_speed.py --corpus .corpus --toolchain nvcc \
    --backend cuda --backend opencl --gpu-only --gpu-sizes --timeout 60 ${SPEED_ONLY:+--only $SPEED_ONLY} --json "$OUT/ocl_speed.json" \
    --md "$OUT/ocl_speed.md" >/dev/null 2>/tmp/ocl_speed.err
tail -3 "$OUT/ocl_speed.md"
if [ "$SWEEP_S" -gt 0 ]; then  # SWEEP_S=0: the timings alone
  [ "$GPU_TESTS" = 1 ] && ( timeout $((SWEEP_S - 10)) python3 -m pytest -q -m gpu -p no:cacheprovider -n 3 --timeout 200 >"$OUT/pytest-gpu.log" 2>&1 ) &
  timeout "$SWEEP_S" python3 bench/corpus_programs.py --corpus .corpus --timeout 60 --jobs "${JOBS:-8}" $ONLY --out /tmp/porter-corpus \
      --to hip,opencl --toolchains nvcc,hip-on-cuda,opencl --json "$OUT/corpus_h200.json.gz" >"$OUT/corpus_h200.md" 2>&1
  pkill -f "python3 -m porter port"; wait
  tail -3 "$OUT/pytest-gpu.log"; grep -c '^| ' "$OUT/corpus_h200.md"
fi
