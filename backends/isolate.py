"""Isolated execution: every compile and every run of user or generated code happens in a child process.

The harness (validation, benchmarking) never calls a backend's `compile`/`load`/launch in its own
process.  It describes the work as a :class:`Job` (plain data, picklable) and calls
:func:`run_job`, which runs it in a fresh child process with a timeout and returns a
:class:`JobResult`: an infinite loop, a crash (segfault, abort) or an out-of-memory in the
child becomes a result with ``stage`` "timeout" / "crash" and the log, never an exception in
the parent and never a hung porter.

Outputs come back to the parent as NumPy arrays; comparisons happen in the parent, so a
kernel that corrupts its own process cannot forge a verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from porter.backends import Availability, CompileOptions, Device, ResourceReport


@dataclass(frozen=True)
class LocalBuffer:
    """An OpenCL `__local` kernel argument of `nbytes` (e.g. the translation of `extern __shared__`)."""

    nbytes: int


# A kernel argument: an array (copied to a fresh device buffer for each run), a NumPy scalar
# (np.int32(5), np.float32(0.5): its dtype is the C type passed), or a LocalBuffer.
ArgValue = np.ndarray | np.generic | LocalBuffer


@dataclass(frozen=True)
class TimingPlan:
    warmup: int = 3
    repeats: int = 20  # timed launches (device events); median and IQR are computed by the caller
    flush_l2: bool = True  # evict L2 between timed launches
    rotate: int = 1  # number of input sets to rotate between timed launches (copies of the inputs)
    max_seconds: float = 10.0  # stop adding repeats past this much device time
    # After the timed launches, copy back the arrays of the last `read_back` rotated input sets
    # (JobResult.timed_outputs), so the outputs of the timed launches themselves can be re-validated.
    read_back: int = 0


@dataclass(frozen=True)
class Job:
    backend: str  # "cuda" | "hip" | "opencl" | "cpu"
    source: str
    entry: str  # kernel name as written in the source (the backend resolves mangling)
    options: CompileOptions = CompileOptions()
    device: Device | None = None  # None: compile only
    args: tuple[Any, ...] = ()  # ArgValue per kernel parameter, in parameter order
    grid: tuple[int, ...] = (1,)
    block: tuple[int, ...] = (1,)
    shared_bytes: int = 0
    runs: int = 1  # launches on fresh copies of the inputs; outputs of each run come back
    read_back: tuple[int, ...] | None = None  # indices of array args to copy back; None: every array
    timing: TimingPlan | None = None  # after the runs: timed launches
    use_cache: bool = True
    seed: int = 0  # scheduling seed for the CPU emulator (varied per run by the emulator)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the child (OCL_ICD_VENDORS...)
    wrapper: tuple[str, ...] = ()  # command prefix for the child, e.g. ("oclgrind",) for a checking run
    # Address-space limit for the child's load/launch stages, in MiB.  None: a generous default (80% of
    # RAM) for the "cpu" emulator and CPU OpenCL devices, so a runaway allocation is a reported failure,
    # not the OOM killer; no limit for GPUs (drivers reserve huge virtual ranges).  0: never limit.
    memory_limit_mb: int | None = None
    # Module globals set after load and before every run (and before the timed launches), through
    # the backend's `set_symbol(program, name, array)`: cudaMemcpyToSymbol of `__constant__` data.
    symbols: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class JobResult:
    ok: bool
    stage: str  # "done" | "compile" | "load" | "launch" | "timeout" | "crash" | "unavailable" | "emulate"
    error: str = ""  # one paragraph: what went wrong
    log: str = ""  # compiler log / child stderr (checker output lives here too)
    toolchain: str = ""
    report: ResourceReport | None = None
    outputs: list[list[np.ndarray]] = field(default_factory=list)  # [run][read_back index]
    times_ms: list[float] = field(default_factory=list)
    # [set][read_back index]: the last TimingPlan.read_back rotated input sets after the timed launches
    timed_outputs: list[list[np.ndarray]] = field(default_factory=list)
    compile_s: float = 0.0
    wall_s: float = 0.0
    cached: bool = False
    returncode: int | None = None  # the child's exit status (negative: killed by that signal)


# Bounds on the child output kept in JobResult.log: the head (first errors) and the tail (last words).
LOG_HEAD = 16 * 1024
LOG_TAIL = 48 * 1024

CHILD_MODULE = "porter.backends._child"


def run_job(job: Job, timeout_s: float = 60.0) -> JobResult:
    """Run `job` in a fresh child process group; whatever happens there comes back as a JobResult.

    The timeout covers the whole job (compile, load, runs, timing).  On timeout the whole process group
    is killed (the compiler or a checker under `job.wrapper` included).  Never raises for anything the
    child does.
    """
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="porter-job-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        job_file, result_file, progress_file, log_file = (
            work / "job.pkl",
            work / "result.pkl",
            work / "progress.json",
            work / "output.log",
        )
        try:
            job_file.write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            return JobResult(ok=False, stage="load", error=f"cannot hand the job to a child process: {err}")
        cmd = [*job.wrapper, sys.executable, "-m", CHILD_MODULE, "job", str(job_file), str(result_file)]
        env = {
            **os.environ,
            **job.env,
            "PORTER_PROGRESS_FILE": str(progress_file),
            "PYTHONFAULTHANDLER": "1",  # a Python stack in the log when the child dies of a signal
            "PYTHONUNBUFFERED": "1",  # and everything it printed before
        }
        rc = _spawn(cmd, env, work, timeout_s, log_file)
        output = read_bounded(log_file)
        progress = _read_progress(progress_file)
        result = _read_result(result_file)
        wall = time.monotonic() - start

    where = _where(progress)
    if rc is None:
        result = JobResult(
            ok=False,
            stage="timeout",
            error=f"timed out: exceeded the {timeout_s:g} s limit{where}; the process group was killed",
        )
    elif result is None:
        result = JobResult(ok=False, stage="crash", error=_crash_message(rc, where))
    if result.stage in ("timeout", "crash"):
        result.toolchain = result.toolchain or str(progress.get("toolchain", ""))
        result.compile_s = result.compile_s or float(progress.get("compile_s", 0.0))
        result.cached = result.cached or bool(progress.get("cached", False))
    result.returncode = rc
    result.wall_s = wall
    if output.strip():
        result.log = (
            f"{result.log.rstrip()}\n--- child output ---\n{output}" if result.log.strip() else output
        )
    return result


def probe_backend(name: str, timeout_s: float = 60.0) -> Availability:
    """`get_backend(name).availability()` in a child process: an import error, a crash in a driver or a
    hang becomes an Availability that can neither compile nor run, with the reason as its hint."""
    with tempfile.TemporaryDirectory(prefix="porter-probe-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        result_file, log_file = work / "result.pkl", work / "output.log"
        cmd = [sys.executable, "-m", CHILD_MODULE, "probe", name, str(result_file)]
        rc = _spawn(cmd, {**os.environ, "PYTHONFAULTHANDLER": "1"}, work, timeout_s, log_file)
        found = _read_pickle(result_file)
        output = read_bounded(log_file, head=2048, tail=2048)
    if isinstance(found, Availability):
        return found
    if isinstance(found, str):  # the child caught an exception: its one-line description
        reason = found
    elif rc is None:
        reason = f"probing the backend timed out after {timeout_s:g} s"
    else:
        reason = _crash_message(rc, "")
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
    details = (last,) if last and last not in reason else ()
    return Availability(name=name, compile=False, run=False, toolchain="", hint=reason, details=details)


# ------------------------------------------------------------------------------- helpers


def _spawn(
    cmd: Sequence[str], env: dict[str, str], cwd: Path, timeout_s: float, log_file: Path
) -> int | None:
    """Run `cmd` in its own session, output to `log_file`.  The exit status, or None after a timeout."""
    with open(log_file, "wb") as log:
        try:
            proc = subprocess.Popen(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as err:
            log.write(f"cannot start {cmd[0]}: {err}\n".encode())
            return 127
        try:
            return proc.wait(timeout=max(timeout_s, 0.001))
        except subprocess.TimeoutExpired:
            return None
        finally:
            if proc.returncode is None:  # timed out, or the parent was interrupted: take the group down
                _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: the child's pid is its group id
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _crash_message(rc: int, where: str) -> str:
    if rc < 0:
        return f"crashed: killed by {signal_name(-rc)}{where}"
    if rc > 128 and rc - 128 in {s.value for s in signal.Signals}:
        # a shell or wrapper between us and the child reports a signal as 128 + n
        return f"crashed: exit status {rc} ({signal_name(rc - 128)}){where}, no result"
    return f"crashed: exit status {rc}{where}, no result"


def _where(progress: dict[str, Any]) -> str:
    stage = progress.get("stage")
    if not stage:
        return " before the job started"
    run = progress.get("run")
    return f" during {stage}" + (f" (run {run})" if run is not None and stage == "launch" else "")


def read_bounded(path: Path, head: int = LOG_HEAD, tail: int = LOG_TAIL) -> str:
    """A file's text, keeping its first `head` and last `tail` bytes when it is longer."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(0)
            if size <= head + tail:
                data = fh.read()
            else:
                first = fh.read(head)
                fh.seek(size - tail)
                data = first + f"\n... [{size - head - tail} bytes omitted] ...\n".encode() + fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def _read_progress(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _read_pickle(path: Path) -> Any:
    try:
        return pickle.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a torn or garbled result is "no result"
        return None


def _read_result(path: Path) -> JobResult | None:
    found = _read_pickle(path)
    return found if isinstance(found, JobResult) else None
