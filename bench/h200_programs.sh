#!/usr/bin/env bash
# On the lent H200 machine (after bench/run_h200.sh installed porter there): the development corpus ported,
# built and run as programs (original with nvcc on the GPU, HIP port through HIP-on-CUDA on the GPU, both
# on the CPU runtime too).  Needs the corpus carried as .corpus/ (a copy of ../shared/corpus, never
# committed).  Usage there:  [ONLY=name,name] bash bench/h200_programs.sh [seconds for the whole sweep]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} PORTER_CACHE_DIR=/tmp/porter-cache
if ! python3 -c "import porter, tree_sitter" 2>/dev/null; then  # a fresh machine: install as run_h200.sh does
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >"$OUT/install.log" 2>&1 || exit 1
fi
timeout "${1:-300}" python3 bench/corpus_programs.py --corpus .corpus --timeout 60 --out /tmp/porter-corpus ${ONLY:+--only "$ONLY"} \
    --toolchains nvcc,hip-on-cuda,cpu-runtime --json "$OUT/corpus_h200.json" >"$OUT/corpus_h200.md" 2>&1
mkdir -p "$OUT/reports"
for r in /tmp/porter-corpus/*/report.json; do n=$(basename "$(dirname "$r")"); cp "$r" "$OUT/reports/$n.json"; done
tail -45 "$OUT/corpus_h200.md"
