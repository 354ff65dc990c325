"""porter stopped by a signal: SIGKILL leaves its temporary folder, which the next porter to start
removes (never a live porter's, never what porter did not make); SIGTERM and Ctrl-C remove it at once
and say so in one line (exit 143 and 130)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Hang
from fakes.programs import vector_add_program

from porter import tempdirs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
KEY = "sk-ant-api03-E2Efake0000SECRET1111value2222xyz"
REWRITE = """Same result, operands swapped.

```cuda
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = b[i] + a[i];
}
```
"""


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    """The TMPDIR of the porter processes of one test (no other porter's folders in it)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def _env(tmp_path: Path, tmpdir_: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(COLUMNS="200", TMPDIR=str(tmpdir_), PORTER_CACHE_DIR=str(tmp_path / "cache"), **extra)
    return env


def _porter(*args: str) -> list[str]:
    exe = shutil.which("porter")
    return [*([exe] if exe else [sys.executable, "-m", "porter"]), *args]


@pytest.fixture
def running(tmp_path: Path, tmpdir_: Path, emulator: None) -> Iterator[Callable[[], subprocess.Popen[str]]]:
    """Start `porter port vector_add.cu --to opencl` (validation: several seconds of jobs)."""
    started: list[subprocess.Popen[str]] = []
    src = tmp_path / "src"
    src.mkdir()
    for name in ("vector_add.cu", "common.cuh"):
        shutil.copy(SAMPLES / name, src / name)

    def start() -> subprocess.Popen[str]:
        out = tmp_path / f"out{len(started)}"
        proc = subprocess.Popen(
            _porter("port", str(src / "vector_add.cu"), "--to", "opencl", "--out", str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path, tmpdir_),
        )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _run_folders(tmpdir_: Path) -> list[Path]:
    return sorted(tmpdir_.glob(f"{tempdirs.PREFIX}*"))


def _wait_for_a_job(proc: subprocess.Popen[str], tmpdir_: Path) -> Path:
    """The run folder of `proc` once a job folder is in it (the job's child running)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        jobs = list(tmpdir_.glob(f"{tempdirs.PREFIX}*/porter-job-*"))
        if jobs:
            return jobs[0].parent
        time.sleep(0.05)
    proc.kill()
    out, err = proc.communicate()
    pytest.fail(f"no job folder appeared under {tmpdir_} (exit {proc.returncode}): {err[-2000:]}")


def test_sigkill_leaves_a_folder_the_next_start_removes(
    tmp_path: Path, tmpdir_: Path, running: Callable[[], subprocess.Popen[str]]
) -> None:
    proc = running()
    folder = _wait_for_a_job(proc, tmpdir_)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert list(folder.glob("porter-job-*")), "the killed porter's job folder is there"
    # beside it, what porter did not make, and what it cannot tell is dead: kept
    foreign = [tmpdir_ / "porter-job-legacy", tmpdir_ / f"{tempdirs.PREFIX}nomarker", tmpdir_ / "mine"]
    for f in foreign:
        f.mkdir()
    (tmpdir_ / "mine" / tempdirs.MARKER).write_text((folder / tempdirs.MARKER).read_text())
    (tmpdir_ / f"{tempdirs.PREFIX}link").symlink_to(tmpdir_ / "mine")
    nxt = subprocess.run(_porter("--version"), capture_output=True, text=True, env=_env(tmp_path, tmpdir_))
    assert nxt.returncode == 0, nxt.stderr
    assert not folder.exists()
    assert all(f.is_dir() for f in foreign) and (tmpdir_ / f"{tempdirs.PREFIX}link").is_symlink()
    assert _run_folders(tmpdir_) == [
        tmpdir_ / f"{tempdirs.PREFIX}link",
        tmpdir_ / f"{tempdirs.PREFIX}nomarker",
    ]


def test_a_live_porters_folder_survives_another_start(
    tmp_path: Path, tmpdir_: Path, running: Callable[[], subprocess.Popen[str]]
) -> None:
    first = running()
    folder = _wait_for_a_job(first, tmpdir_)
    other = subprocess.run(_porter("--version"), capture_output=True, text=True, env=_env(tmp_path, tmpdir_))
    assert other.returncode == 0 and folder.is_dir()
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err  # undisturbed
    assert _run_folders(tmpdir_) == []  # and its folder gone when it ended


@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGTERM, 143, "porter: terminated (SIGTERM)"),
                                                   (signal.SIGINT, 130, "porter: interrupted")])  # fmt: skip
def test_sigterm_and_ctrl_c_remove_the_folder_and_say_so_once(
    tmpdir_: Path, running: Callable[[], subprocess.Popen[str]], sig: signal.Signals, code: int, line: str
) -> None:
    proc = running()
    _wait_for_a_job(proc, tmpdir_)
    time.sleep(0.5)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    said = [ln for ln in (out + err).splitlines() if re.search(r"\b(interrupted|terminated)\b", ln)]
    assert said == [line], err
    assert "Traceback" not in err
    assert list(tmpdir_.iterdir()) == []


def test_optimize_stopped_by_ctrl_c_says_so_once(tmp_path: Path, tmpdir_: Path, emulator: None) -> None:
    # the loop's progress said "stopped: interrupted; ..." and the command line "porter: interrupted"
    pytest.importorskip("anthropic")
    src = vector_add_program(tmp_path / "src")
    with FakeLLMServer() as server:
        server.script(REWRITE, Hang(60))
        proc = subprocess.Popen(
            _porter("optimize", str(src), "--model", "anthropic:claude-sonnet-4-5", "--base-url", server.url,
                    "--candidates", "1", "--rounds", "2", "--out", str(tmp_path / "out")),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(tmp_path, tmpdir_, ANTHROPIC_API_KEY=KEY),
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while len(server.requests) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # round 2's request hangs: the run is waiting on the model
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert [ln for ln in (out + err).splitlines() if re.search(r"\binterrupted\b", ln)] == [
        "porter: interrupted"
    ], err
    assert f"what was validated so far is in {tmp_path / 'out' / 'report.json'}" in err
    assert list(tmpdir_.iterdir()) == []
