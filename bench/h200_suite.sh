#!/usr/bin/env bash
# Issue #33's measurement on the lent GPU machine: a part of the development corpus (.corpus, carried) as one
# suite, `porter port --suite` at the default -j and at -j 1, an empty cache, every toolchain the machine has; wall
# time of each, the suite's own summary, and the GPU's utilisation sampled every 0.5 s (nvidia-smi) meanwhile.
# Usage there:  [PROGRAMS="vectorAdd nw ..."|all] [TOOLCHAINS=nvcc,hip-on-cuda,opencl] [DEFAULT_S=200 J1_S=330]
#               [WRAP="python3 bench/cpu_breakdown.py --"] bash bench/h200_suite.sh
#   (PROGRAMS=all: every program with a run; J1_S=0: no -j 1 run; WRAP: a command prefix for each suite run,
#   e.g. the CPU breakdown, whose table ends its log; each program's report.md, summary.md and the GPU samples land
#   in reports-NAME.tgz;
#   CACHE=none: no compile cache at all, where by default each run starts with an empty one, as a first run does;
#   NAME=x: the default -j run's name (/tmp/suite-x, x.log), so two runs of one call (an A/B) keep both;
#   EXTRA="--executor ray --ray-address local": porter arguments added to the default -j run (Ray on this
#   machine: its wheels unpacked into /tmp/site first, e.g. by out/ray-site.tar.xz; see bench/h200_ray.sh);
#   CONTINUE=1: go on from where an earlier call on this warm machine stopped -- the same output folder and cache,
#   no --fresh, so every program that finished is resumed and every verdict reached is reused: the corpus measured
#   over two calls when one call's 10 minutes are too few)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/suite"
source bench/h200_env.sh || exit 1
PROGRAMS=${PROGRAMS:-"vectorAdd matrixMul simpleTemplates scalarProd backprop gaussian nw pathfinder"}
# the corpus suite (bench/corpus_runs.toml) with its root at the carried copy and only PROGRAMS kept
python3 - "$PWD/.corpus" "$PROGRAMS" "${TOOLCHAINS:-}" >/tmp/suite.toml <<'PY'
import json, re, sys, tomllib
from pathlib import Path
sys.path.insert(0, "bench")
from corpus_inputs import placed, prepare
root, keep, toolchains = sys.argv[1], set(sys.argv[2].split()), sys.argv[3]
doc = tomllib.load(open("bench/corpus_runs.toml", "rb"))["programs"]
if keep == {"all"}:
    keep = {name for name, entry in doc.items() if entry.get("runs") or entry.get("generated_runs")}
# programs run on inputs bench/corpus_inputs.py makes (their data is not in the corpus): made here, named
generated = {n: prepare(n, doc[n], Path("/tmp/inputs"), False) for n in keep if not doc[n].get("runs")}
# those opening their input beside the folder they run in: a copy of the program with its input placed
moved = {n: p for n in keep if not doc[n].get("runs") and (p := placed(n, doc[n], Path(root), Path("/tmp/inputs"), False))}
generated = {n: (runs, moved[n][1] if n in moved else data) for n, (runs, data) in generated.items()}
generated = {n: made for n, made in generated.items() if made[1] is not None}
section = None
for line in open("bench/corpus_runs.toml"):
    m = re.match(r"\[(?:programs\.([^\]]+)|defaults)\]", line)
    if m:
        section = m.group(1) or "defaults"
    if line.startswith("root ="):
        line = f'root = "{root}"\n'
    if section in moved and re.match(r"path\s*=", line):
        line = f"path = {json.dumps(str(moved[section][0]))}\n"
    if section in generated and re.match(r"runs\s*=", line):
        runs, folder = generated[section]
        line = f"runs = {json.dumps(runs)}\ndata = {json.dumps([str(folder)])}\n"
    if section is None or section == "defaults" or section in keep:
        print(line, end="")
    if m and section == "defaults" and toolchains:
        print(f'toolchains = "{toolchains}"')
PY
run() {  # name, seconds, porter arguments...
  local name=$1 limit=$2; shift 2
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 >"$OUT/suite/util-$name.csv" 2>/dev/null &
  local smi=$! t0; t0=$(date +%s.%N)
  # a first run's cache: empty at the start, filled as the suite goes (CACHE=none: no cache at all, --no-cache)
  local nocache=(); [ "${CACHE:-empty}" = none ] && nocache=(--no-cache)
  local fresh=(--fresh)
  if [ "${CONTINUE:-0}" = 1 ]; then fresh=(); else rm -rf "/tmp/cache-$name"; fi
  mkdir -p "/tmp/cache-$name"
  PORTER_CACHE_DIR="/tmp/cache-$name" timeout "$limit" ${WRAP:-} python3 -m porter "${nocache[@]}" port \
      --suite /tmp/suite.toml --out "/tmp/suite-$name" "${fresh[@]}" "$@" >"$OUT/suite/$name.log" 2>&1
  local rc=$?; kill $smi 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$t0") s nproc=$(nproc)" | tee -a "$OUT/suite/walls.txt"
  cp "/tmp/suite-$name/summary.json" "$OUT/suite/summary-$name.json" 2>/dev/null
  # each port's kernel speed against the original's, per target and device (bench/suite_speed.py)
  python3 bench/suite_speed.py "/tmp/suite-$name" >"$OUT/suite/speed-$name.md" 2>&1
  # the device tool brings back few files: the rest (summary.md, the GPU samples, the reports and logs) in one
  cp "$OUT/suite/util-$name.csv" "/tmp/suite-$name/util.csv" 2>/dev/null && rm -f "$OUT/suite/util-$name.csv"
  (cd "/tmp/suite-$name" && tar -czf "$OUT/suite/reports-$name.tgz" summary.md util.csv */report.md .suite/*.log 2>/dev/null)
}
run "${NAME:-default}" "${DEFAULT_S:-200}" ${EXTRA:-}
[ "${J1_S:-330}" -gt 0 ] && run j1 "${J1_S:-330}" -j 1
