#!/usr/bin/env bash
# Issue #33's "Ray on one node" on the lent GPU machine: the same part of the corpus as one suite through
# `--executor ray --ray-address local` (a Ray of this machine for the run: 16 CPUs, its GPU) and locally at the
# default -j, one after the other, each from an empty cache; walls in $OUT/suite/walls.txt, summaries beside.
# Ray comes from a tarball made by bench/ray_site.sh (carried: the machine has no Ray and no package index).
# Usage there:  RAY_SITE=out/ray-site.tar.xz [PROGRAMS="..."] [RAY_S=200 LOCAL_S=200] bash bench/h200_ray.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/suite"
source bench/h200_env.sh || exit 1
if ! python3 -c "import ray" 2>/dev/null; then
  tar -xJf "${RAY_SITE:-out/ray-site.tar.xz}" -C /tmp/site || exit 1
fi
# a tarball made before bench/ray_site.sh kept the files' modes: Ray's own programs executable
chmod +x /tmp/site/ray/core/src/ray/*/* 2>/dev/null
python3 -c "import ray; print('ray', ray.__version__)" | tee "$OUT/suite/ray.txt"
# Ray's raylets and workers write their session under /tmp/ray; what they logged comes back on failure
NAME=ray J1_S=0 DEFAULT_S=${RAY_S:-200} EXTRA="--executor ray --ray-address local" bash bench/h200_suite.sh
NAME=local J1_S=0 DEFAULT_S=${LOCAL_S:-200} bash bench/h200_suite.sh
(cd /tmp/ray 2>/dev/null && tar -czf "$OUT/suite/ray-logs.tgz" session_latest/logs/*.err 2>/dev/null)
cat "$OUT/suite/walls.txt"
