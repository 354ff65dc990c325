#!/usr/bin/env bash
# On the lent H200 machine (after bench/run_h200.sh installed porter and registered NVIDIA's OpenCL): Rodinia
# programs as porter's OpenCL programs beside the CUDA original and the suite's own hand-written OpenCL
# version (../shared/corpus/rodinia/opencl, carried as .corpus/), same sizes: the program verdict of porter's
# port on NVIDIA's OpenCL, and each run's wall time (the programs' own kernel-time lines are in the logs).
# Usage there:  [ONLY="gaussian nw"] bash bench/h200_opencl_programs.sh [seconds per step]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/ocl"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} PORTER_CACHE_DIR=/tmp/porter-cache
export OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-/tmp/icd}
STEP=${1:-150}
CUDA=${CUDA_HOME:-/usr/local/cuda}
ROD=/tmp/rodinia; rm -rf "$ROD"; cp -r .corpus/rodinia "$ROD"
# name | CUDA folder's run (porter --run) | hand-written OpenCL executable and arguments (same size)
TABLE="gaussian|./gaussian -s 1024|gaussian.out -s 1024 -p 0 -d 0
nw|./needle 4096 10|nw.out 4096 10 ./nw.cl -p 0 -d 0
pathfinder|./pathfinder 100000 100 20|pathfinder.out -c 100000 -r 100 -h 20 -p 0 -d 0
lud|cuda/lud_cuda -s 2048|lud.out -s 2048 -p 0 -d 0
backprop|./backprop 524288|backprop.out -n 524288 -p 0 -d 0
lavaMD|./lavaMD -boxes1d 10|lavaMD.out -boxes1d 10 -p 0 -d 0"
echo "| program | porter OpenCL verdict (NVIDIA) | CUDA original s | porter OpenCL s | hand-written OpenCL s |" >"$OUT/ocl/table.md"
echo "|---|---|---|---|---|" >>"$OUT/ocl/table.md"
while IFS='|' read -r name cuda_run hand; do
  [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]] && continue
  echo "== $name" | tee -a "$OUT/ocl/log.txt"
  timeout "$STEP" python3 -m porter port "$ROD/cuda/$name" --to opencl --run "$cuda_run" --timeout 120 \
    --toolchains nvcc,opencl --out "/tmp/port-$name" --json >"$OUT/ocl/$name.json" 2>"$OUT/ocl/$name.err"
  read -r verdict t_cuda t_ocl < <(python3 - "$OUT/ocl/$name.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("porter-failed - -"); sys.exit()
p = d["program"]
v = p.get("verdicts", {}).get("opencl", {})
runs = p.get("runs", [])
orig = [o for r in runs for o in (r.get("originals") or [r.get("original")]) if o and "cuda:" in str(o.get("device"))]
ocl = [x for r in runs for x in r["variants"] if x.get("target") == "opencl" and "NVIDIA" in str(x.get("device"))]
print(f"{v.get('status','-')}", orig[0].get("seconds") if orig else "-", ocl[0].get("seconds") if ocl else "-")
PY
)
  hand_s="-"
  exe=${hand%% *}; args=${hand#* }
  if ( cd "$ROD/opencl/$name" && timeout "$STEP" make NV_OPENCL_INC="$CUDA/include" NV_OPENCL_LIB="$CUDA/lib64" \
        OPENCL_INC="$CUDA/include" OPENCL_LIB="$CUDA/lib64" >"$OUT/ocl/$name.hand-build.log" 2>&1 ); then
    start=$(date +%s.%N)
    ( cd "$ROD/opencl/$name" && timeout 120 ./$exe $args >"$OUT/ocl/$name.hand-run.log" 2>&1 ) && \
      hand_s=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$start" "$(date +%s.%N)")
  fi
  echo "| $name | $verdict | $t_cuda | $t_ocl | $hand_s |" | tee -a "$OUT/ocl/table.md"
done <<<"$TABLE"
cat "$OUT/ocl/table.md"
