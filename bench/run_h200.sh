#!/usr/bin/env bash
# One call on the lent H200 machine: install the wheels porter lacks there, register NVIDIA's
# OpenCL beside PoCL, then run the gpu-marked tests and the GPU benchmarks, logging under $OUT.
# Usage there:  bash bench/run_h200.sh [pytest args...]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail "$OUT/install.log"; exit 1; }
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd && cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null
export OCL_ICD_VENDORS=/tmp/icd
export PORTER_CACHE_DIR=/tmp/porter-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
python3 -m pytest -q -m gpu -p no:cacheprovider "$@" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -40
