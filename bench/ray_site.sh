#!/usr/bin/env bash
# Ray for the lent GPU machine (issue #33's "Ray on one node"): the ray wheel for Python 3.12 is 79 MB, more than
# the device tool's 64 MiB carry, so this unpacks it with the wheels it needs, leaves out what a porter suite
# never imports (Java jars, RLlib, Data, Serve, Tune, Train, LLM) and packs the rest as one xz tarball (about
# 32 MB) that bench/h200_ray.sh unpacks into /tmp/site there.
# Usage, from the project's root on a machine with a package index:  bash bench/ray_site.sh [out/ray-site.tar.xz]
set -euo pipefail
dest=$(realpath -m "${1:-out/ray-site.tar.xz}")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d "$work/wheels" "ray>=2.40"
mkdir -p "$work/site" "$(dirname "$dest")"
# a wheel is a zip of what lands in site-packages (its scripts are not needed: porter starts Ray itself),
# unpacked with each file's mode: Ray's gcs_server and raylet are programs (`python3 -m zipfile -e` drops the
# executable bit, and Ray then stops with "gcs_server: Permission denied")
python3 - "$work/site" "$work"/wheels/*.whl <<'PY'
import os, sys, zipfile
site = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = z.extract(info, site)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(path, mode)
PY
rm -rf "$work"/site/ray/{jars,rllib,data,serve,tune,train,llm}
tar -C "$work/site" -cJf "$dest" .
ls -la "$dest"
