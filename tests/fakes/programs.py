"""The user's side of the command-line tests: a copy of a sample program to work on, and porter run
as a user runs it (a subprocess with its own cache and only the keys a test gives it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
SPECS = ROOT / "tests" / "fixtures" / "specs"


def vector_add_program(folder: Path) -> Path:
    """samples/cuda/vector_add.cu (and its header) copied into `folder`, with a spec of tiny sizes."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLES / "vector_add.cu", folder)
    shutil.copy(SAMPLES / "common.cuh", folder)
    shutil.copy(SPECS / "vector_add.cu.porter.toml", folder)
    return folder / "vector_add.cu"


def run_porter(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`porter ARGS` with no API key or base URL from the caller's environment, a cache under
    `tmp_path`, and `env` on top."""
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    full = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    full.update(COLUMNS="200", PORTER_CACHE_DIR=str(tmp_path / "cache"), **(env or {}))
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=full)


def opencl_program_port(tmp_path: Path, program: Path, run: str = "") -> tuple[dict[str, Any], Path]:
    """`porter port PROGRAM --to opencl --run RUN --toolchains cpu-runtime,opencl --json` into `tmp_path`/out
    (skipped where no OpenCL device runs code): its report and the output folder, once porter exited 0 and
    the OpenCL program matched the original."""
    from porter.plan import run_devices

    if not run_devices("opencl"):
        pytest.skip("no OpenCL device here")
    out = tmp_path / "out"
    args = ["port", str(program), "--to", "opencl", "--run", run, "--toolchains", "cpu-runtime,opencl"]
    r = run_porter(tmp_path, *args, "--out", str(out), "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    doc: dict[str, Any] = json.loads(r.stdout)
    assert doc["program"]["verdicts"]["opencl"]["status"] == "matches", doc["program"]["verdicts"]
    return doc, out


def plant_port(
    monkeypatch: pytest.MonkeyPatch, target: str, edit: Callable[[str], str], instance: str | None = None
) -> None:
    """Every `target` port the program's plan hands out (of the kernel instance `instance` only, when given)
    with its device code rewritten by `edit`, which must change it: a planted defect a test expects porter
    to catch."""
    from porter.workflows.program_plan import ProgramPlan

    real = ProgramPlan.variant

    def planted(self: ProgramPlan, planned_target: str, name: str, *rest: Any, **kw: Any) -> Any:
        found = real(self, planned_target, name, *rest, **kw)
        if (
            planned_target != target
            or (instance is not None and name != instance)
            or not hasattr(found, "variant")
        ):
            return found
        changed = edit(found.variant.source)
        assert changed != found.variant.source, "the planted edit changed nothing"
        return replace(found, variant=replace(found.variant, source=changed))

    monkeypatch.setattr(ProgramPlan, "variant", planted)
