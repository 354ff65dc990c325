#!/usr/bin/env bash
# On the lent H200 machine: capture from native CUDA runs and replay/time at the captured launches.
#   1. a few corpus programs ported and run (bench/h200_programs.sh): replays from the GPU's capture;
#   2. matrixMul captured natively (porter capture --toolchain nvcc) and each kernel timed at its captured
#      launches on the GPU (porter bench --capture), original, HIP-on-CUDA and NVIDIA OpenCL.
# Needs the corpus carried as .corpus/.  Usage there:  [ONLY=a,b] bash bench/h200_capture.sh [seconds]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} PORTER_CACHE_DIR=/tmp/porter-cache
if ! python3 -c "import porter.backends, tree_sitter" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >"$OUT/install.log" 2>&1 || exit 1
fi
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd && cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null
export OCL_ICD_VENDORS=/tmp/icd
MM=.corpus/cuda-samples/Samples/0_Introduction/matrixMul
rm -rf /tmp/mm && cp -r "$MM" /tmp/mm
timeout 90 python3 -m porter capture /tmp/mm --run ./matrixMul -I .corpus/cuda-samples/Common --toolchain nvcc --out /tmp/mm.cap --json >"$OUT/capture_mm.json" 2>"$OUT/capture_mm.err"
timeout 120 python3 -m porter bench /tmp/mm/matrixMul.cu -I .corpus/cuda-samples/Common --capture /tmp/mm.cap --backend cuda --backend hip --backend opencl --json >"$OUT/bench_mm.json" 2>"$OUT/bench_mm.err"
ONLY=${ONLY:-matrixMul,simpleTemplates,scalarProd,transpose} timeout "${1:-200}" bash bench/h200_programs.sh "${1:-200}" >/dev/null 2>&1
tail -8 "$OUT/corpus_h200.md"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
try:
    d = json.loads((out / "bench_mm.json").read_text())
    for k in d["kernels"]:
        for r in k["results"]:
            print("bench", k["kernel"], r["device"], r["ok"], r.get("median_ms"), r.get("floor_ms"), r.get("speedup"), (r.get("reason") or "")[:120])
except Exception as e:
    print("bench: no result", e, (out / "bench_mm.err").read_text()[-400:] if (out / "bench_mm.err").exists() else "")
for f in sorted((out / "reports").glob("*.json")):
    doc = json.loads(f.read_text())
    for k in doc["kernels"]:
        for r in k["replays"]:
            print(f.stem, r["instance"], r["variant"], r["device"], r["status"], (r.get("reason") or "")[:90])
            if r["status"] == "failed":
                print("   LOG:", (r.get("log") or "")[-700:].replace("\n", " | "))
PY
