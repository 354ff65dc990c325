# Sourced by the bench/h200_*.sh scripts on the lent GPU machine (never `git checkout` there: it restores the
# landed commit, not this session's): installs the wheels porter lacks there
# (.whl/, carried) into /tmp/site and porter itself (once per machine: /tmp survives between calls while the
# machine is warm), registers NVIDIA's OpenCL beside PoCL, and records the GPU in $OUT/gpu.txt.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} PORTER_CACHE_DIR=/tmp/porter-cache
if ! python3 -c "import porter, tree_sitter, islpy" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
    python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail "$OUT/install.log"; return 1; }
fi
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd && cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null
export OCL_ICD_VENDORS=/tmp/icd
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
# which code runs here: the device's checkout is this session's working tree over the landed commit, so its own
# HEAD is not this session's -- record both what git says and a digest of the files porter runs
{ git log -1 --format='HEAD %h %s' 2>/dev/null; git status --short 2>/dev/null | head -40;
  find porter backends -name '*.py' -o -name '*.toml' -o -name '*.h' -o -name '*.cl' | sort | xargs cat | sha256sum; } >"$OUT/code.txt" 2>&1
