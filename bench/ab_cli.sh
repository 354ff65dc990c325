#!/usr/bin/env bash
# Side-by-side warm-cache wall time of `porter port --fresh` and `porter bench` for two trees: an older
# checkout (OLD, a `git worktree` of the commit to compare with) and this one, interleaved so machine
# drift hits both alike.  The old tree runs through PYTHONPATH over this project's venv.
# Usage: bash bench/ab_cli.sh OLD_WORKTREE [SAMPLE...]   e.g. bash bench/ab_cli.sh /tmp/oldtree vector_add
set -uo pipefail
OLD=$1; shift
SAMPLES=${*:-vector_add}
# the old tree's porter.backends / porter.grammars are its top-level folders (setuptools package-dir)
ln -sfn "$OLD/backends" "$OLD/porter/backends"; ln -sfn "$OLD/grammars" "$OLD/porter/grammars"
OUT=$(mktemp -d)
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
run() { if [ "$1" = old ]; then shift; env PYTHONPATH="$OLD" "$@"; else shift; "$@"; fi; }
for n in $SAMPLES; do
  f=samples/cuda/$n.cu
  for v in old new; do run $v .venv/bin/porter port "$f" --out "$OUT/$v-$n" --fresh; run $v .venv/bin/porter bench "$f"; done >/dev/null 2>&1
  for r in 1 2; do
    for v in old new; do
      echo "$n $v port $(t run $v .venv/bin/porter port "$f" --out "$OUT/$v-$n" --fresh) bench $(t run $v .venv/bin/porter bench "$f")"
    done
  done
done
rm -rf "$OUT"
