"""What a kernel child loads before its job: porter's child module and the backends, never the scanner, the
translators or tree-sitter -- every child of every replay pays its imports (bench/child_start.py: the child
module was 0.08 CPU-s beyond NumPy's on the CPU machine, 60-70 ms of it porter.scan, pulled in by one constant)."""

from __future__ import annotations

import json
import subprocess
import sys

# the child's own start (backends/_child.py main) and each backend it may get, as get_backend loads them
LOAD = """import json, sys
import porter.backends._child
from porter.backends import get_backend
for name in ("cpu", "opencl", "cuda", "hip"):
    try:
        get_backend(name)
    except Exception:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("porter.", "tree_sitter", "islpy")))))
"""
HEAVY = (
    "porter.scan",
    "porter.model",
    "porter.translate",
    "porter.plan",
    "porter.harness",
    "tree_sitter",
    "islpy",
)


def test_a_kernel_child_loads_no_scanner_translator_or_parser() -> None:
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "porter.backends.cpu" in loaded and "porter.backends.isolate" in loaded  # it did load the backends
    assert [m for m in loaded if m.startswith(HEAVY)] == []
