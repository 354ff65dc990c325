"""What a compiler says about itself (``nvcc --version``, ``hipcc --version``, ``g++ -dumpfullversion``),
remembered on disk across commands: keyed by the command, the environment it is given and the tool's
file (real path, size, modification time), so a new or changed compiler is asked again.  hipcc, a Perl
script, takes a third of a second to answer; a re-run of an unchanged program should not pay that.
Lives under the cache root (``$PORTER_CACHE_DIR``...), ``tools/``; ``PORTER_NO_CACHE=1`` asks every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence


def tool_output(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60
) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a compiler's self-description command, from the disk memo when the
    tool is the same file as when it last answered; a missing tool or a timeout is (127, "")."""
    from porter.cache import default_root, disabled_by_env

    tool = cmd[0] if os.path.sep in cmd[0] else (shutil.which(cmd[0]) or cmd[0])
    try:
        real = os.path.realpath(tool)
        st = os.stat(real)
    except OSError:
        return 127, ""
    relevant = {k: v for k, v in (env or {}).items() if k.startswith(("HIP", "ROCM", "CUDA", "PATH", "LD_"))}
    key = hashlib.sha256(
        json.dumps([list(cmd), relevant, real, st.st_size, st.st_mtime_ns]).encode()
    ).hexdigest()
    path = default_root() / "tools" / f"{key}.json"
    if not disabled_by_env():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            return int(saved["code"]), str(saved["output"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, errors="replace", timeout=timeout, env=env
        )
    except (OSError, subprocess.TimeoutExpired):
        return 127, ""
    code, output = proc.returncode, proc.stdout + proc.stderr
    if not disabled_by_env():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"code": code, "output": output}), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache: asked again next time
    return code, output


__all__ = ["tool_output"]
