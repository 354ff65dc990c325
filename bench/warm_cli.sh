#!/usr/bin/env bash
# Wall time of `porter port` and `porter bench` on the bundled samples with a warm cache: each command
# runs once to fill the compile cache, then REPS more times; prints the median of those, in seconds.
# Usage: bash bench/warm_cli.sh [REPS]   (from the project root, with .venv set up)
set -uo pipefail
REPS=${1:-3}
PORTER=${PORTER:-.venv/bin/porter}
OUT=$(mktemp -d)
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
timed() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
printf "%-22s %10s %10s\n" sample port_s bench_s
for f in ${SAMPLES:-samples/cuda/*.cu}; do
  n=$(basename "$f" .cu)
  "$PORTER" port "$f" --out "$OUT/$n" --fresh >/dev/null 2>&1
  "$PORTER" bench "$f" >/dev/null 2>&1
  p=$(for _ in $(seq "$REPS"); do timed "$PORTER" port "$f" --out "$OUT/$n" --fresh; done | median)
  b=$(for _ in $(seq "$REPS"); do timed "$PORTER" bench "$f"; done | median)
  printf "%-22s %10.2f %10.2f\n" "$n" "$p" "$b"
done
rm -rf "$OUT"
