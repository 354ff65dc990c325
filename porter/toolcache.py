"""What a compiler says about itself (``nvcc --version``, ``hipcc --version``, ``g++ -dumpfullversion``),
remembered on disk across commands: keyed by the command, the environment it is given and the tool's
file (real path, size, modification time), so a new or changed compiler is asked again.  hipcc, a Perl
script, takes a third of a second to answer; a re-run of an unchanged program should not pay that.
Kept in porter's signed cache (:mod:`porter.cache`, namespace ``tools``): an answer is part of every
toolchain id, so an edited one is never believed; ``PORTER_NO_CACHE=1`` asks every time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

NAMESPACE = "tools"


def tool_output(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60
) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a compiler's self-description command, from the disk memo when the
    tool is the same file as when it last answered; a missing tool or a timeout is (127, "")."""
    from porter.cache import Cache

    tool = cmd[0] if os.path.sep in cmd[0] else (shutil.which(cmd[0]) or cmd[0])
    try:
        real = os.path.realpath(tool)
        st = os.stat(real)
    except OSError:
        return 127, ""
    relevant = {k: v for k, v in (env or {}).items() if k.startswith(("HIP", "ROCM", "CUDA", "PATH", "LD_"))}
    key = Cache.key(NAMESPACE, json.dumps([list(cmd), relevant, real, st.st_size, st.st_mtime_ns]))
    cache = Cache()
    saved = cache.get(NAMESPACE, key)
    if saved is not None:
        try:
            doc = json.loads(saved)
            return int(doc["code"]), str(doc["output"])
        except (ValueError, KeyError, TypeError):
            cache.remove(NAMESPACE, key)
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, errors="replace", timeout=timeout, env=env
        )
    except (OSError, subprocess.TimeoutExpired):
        return 127, ""
    code, output = proc.returncode, proc.stdout + proc.stderr
    cache.put(NAMESPACE, key, json.dumps({"code": code, "output": output}).encode())  # False: asked again
    return code, output


__all__ = ["tool_output"]
