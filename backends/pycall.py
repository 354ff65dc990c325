"""User Python, called as its users call it: one module imported once in a sandboxed child, then its
functions called in turn (``python -m porter.backends._child calls CALLS RESULT_DIR``).

The module is code porter did not write (the user's file, or the drop-in module porter wrote that runs
the user's code): it runs under the same confinement as a kernel (:mod:`porter.sandbox`, a scrubbed
environment).  Each stage -- the import, then each call -- has its own limit, ``stage_timeout_s``:

* the child announces each stage in its progress file (what, and since when) and arms
  :func:`faulthandler.dump_traceback_later` a little before the limit, so the stack of a stage that
  hangs is in its log before the parent kills it;
* the parent waits on the progress file: the whole process group is killed once a stage runs past its
  limit, and the hang is reported once, with the module's line where the stack shows it
  (:class:`Hang`); calls after a hang or a crash are not run.  While it waits it says where the child
  is (``progress(what, seconds)``) every ``progress_every`` seconds.

Results come back as JSON plus ``.npy`` files (never pickle), each array checked against the dtype and
shape it went in with.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from porter.backends import Device, get_backend, spares
from porter.backends.isolate import (
    CHILD_MODULE,
    Job,
    PythonResult,
    _crash_message,
    _read_json,
    _read_progress,
    _start,
    child_plan,
    read_bounded,
)

NOT_RUN = "not run: "  # a call after the one that hung or crashed: how its error starts
PROGRESS_EVERY_S = 10.0  # how often the parent says where a child it waits on is
_POLL_S = 0.2
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<where>.+?)\s*$')


@dataclass(frozen=True)
class Call:
    """One call: `function` of the module with `args` (arrays and numbers, by parameter name, in the
    signature's order); `positional`: as ``function(*args.values())``, as a user calls it."""

    function: str
    args: dict[str, Any]
    positional: bool = False


@dataclass(frozen=True)
class Calls:
    """What the child reads (parent -> child, pickled: trusted): the module's path, its calls, each
    stage's limit, and the devices (as jobs naming them) porter's backends open before the sandbox, as a
    kernel job's child does before its launches (a GPU's driver, an OpenCL runtime)."""

    module: str
    calls: tuple[Call, ...]
    stage_timeout_s: float
    warm: tuple[Job, ...] = ()


@dataclass(frozen=True)
class Hang:
    """A stage that ran past its limit: "import" (the module's top level) or "call" (`function`), and
    where its stack was (the innermost frame in the module's file, else in its folder, else any) when
    the child's dump shows it."""

    stage: str
    module: str
    function: str
    seconds: float
    file: str = ""
    line: int | None = None
    text: str = ""

    @property
    def where(self) -> str:
        """``line 3: while True:`` (the module's own line), ``other.py:7: ...``, or ''."""
        if self.line is None:
            return ""
        place = f"line {self.line}" if self.file == self.module else f"{Path(self.file).name}:{self.line}"
        return f"{place}: {self.text}" if self.text else place

    def describe(self) -> str:
        name = Path(self.module).name
        at = f" (at {self.where})" if self.where else ""
        if self.stage == "import":
            return f"{name} hangs at import{at}: stopped after {self.seconds:g} s"
        if self.stage == "call":
            return f"{self.function} of {name} hangs{at}: stopped after {self.seconds:g} s"
        return f"the child running {name} did not start within {self.seconds:g} s"


@dataclass
class CallsResult:
    """One result per call, in order (a call not run says why), what each call warned, the hang that
    stopped the child (None: none), and the child's output."""

    results: list[PythonResult]
    warnings: list[list[str]] = field(default_factory=list)
    hang: Hang | None = None
    import_error: str = ""  # the module failed at import (every call's error says so too)
    imported: bool = False  # the import finished (a call not run was stopped by an earlier call)
    log: str = ""
    wall_s: float = 0.0


def run_calls(
    module: str,
    calls: Sequence[Call],
    stage_timeout_s: float = 120.0,
    *,
    env: dict[str, str] | None = None,
    devices: Sequence[Device] = (),
    readable: Sequence[str] = (),
    memory_mb: int | None = None,
    progress: Callable[[str, float], None] | None = None,
    progress_every: float | None = None,
) -> CallsResult:
    """Import the Python file `module` once in a sandboxed child and make `calls` in order; `env` is added
    to the child's scrubbed environment; `devices`: those the module runs on, which porter's backends open
    in the child before its sandbox's last layers, as for a kernel job (nothing of the module has run
    then); `readable`: folders beside the module's own it may read."""
    start = time.monotonic()
    path = str(Path(module).resolve())
    spec = Calls(
        path,
        tuple(calls),
        float(stage_timeout_s),
        tuple(Job(backend=d.backend, source="", entry="", device=d) for d in devices),
    )
    work = spares.new_work()
    try:
        import pickle

        (work / "calls.pkl").write_bytes(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
        folders = (str(Path(path).parent), *readable)
        kind = "gpu" if any(d.times for d in devices) else "cpu"  # a GPU's device nodes in the sandbox
        # the sandbox's CPU-time limit covers every stage; each stage's own limit is watched here
        plan = child_plan(
            work, kind, stage_timeout_s * (len(spec.calls) + 2), memory_mb, folders, outbox=False
        )
        if any(get_backend(d.backend).builds_from_early_threads for d in devices):
            # the module builds its kernels once the sandbox is complete, and a runtime like PoCL links
            # each by starting a linker from a worker thread it started before: those threads stay
            # unfiltered (the report's sandbox layers say so); a kernel job builds before, and filters
            # them all
            plan = replace(plan, filter_existing_threads=False)
        progress_file, log_file, result_dir = work / "progress.json", work / "output.log", work / "result"
        cmd = [sys.executable, "-m", CHILD_MODULE, "calls", str(work / "calls.pkl"), str(result_dir)]
        child_env = {**(env or {}), "PORTER_PROGRESS_FILE": str(progress_file)}
        started = _start(cmd, child_env, work, log_file, plan, stdin=subprocess.DEVNULL)
        state: dict[str, Any] = {}
        if isinstance(started, int):
            rc: int | None = started
        else:
            proc, log, _ = started
            try:
                every = progress_every if progress_every is not None else PROGRESS_EVERY_S
                rc, state = _watch(proc, progress_file, path, stage_timeout_s, progress, every)
            finally:
                log.close()
                if proc.returncode is None:
                    spares.kill_group(proc)
        output = read_bounded(log_file, head=4096, tail=8192)
        hang = _hang(state, path, stage_timeout_s, output) if rc is None else None
        return _collect(spec, result_dir, rc, hang, output, plan.limits, time.monotonic() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _watch(
    proc: subprocess.Popen[bytes],
    progress_file: Path,
    module: str,
    limit: float,
    progress: Callable[[str, float], None] | None,
    every: float,
) -> tuple[int | None, dict[str, Any]]:
    """The child's exit status, or None once its current stage ran past `limit` (with the stage it was
    in); `progress` told where it is every `every` seconds meanwhile."""
    started = time.time()
    said = started
    while True:
        try:
            return proc.wait(timeout=_POLL_S), {}
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        state = _read_progress(progress_file)
        since = state.get("since")
        since = float(since) if isinstance(since, (int, float)) and started <= since <= now else started
        if now - since > limit:
            return None, {**state, "since": since}
        if progress is not None and now - said >= every:
            said = now
            progress(_doing(state, module), now - since)


def _doing(state: dict[str, Any], module: str) -> str:
    name = Path(module).name
    if state.get("stage") == "import":
        return f"importing {name}"
    if state.get("stage") == "call":
        return f"calling {state.get('function', '?')}"
    return f"starting the child for {name}"


def _hang(state: dict[str, Any], module: str, limit: float, output: str) -> Hang:
    stage = str(state.get("stage") or "start")
    function = str(state.get("function") or "")
    file, line = _frame(output, module)
    text = ""
    if line is not None and file == module:
        from porter.files import read_text

        try:
            lines = read_text(module).splitlines()
            text = lines[line - 1].strip()[:120] if 0 < line <= len(lines) else ""
        except Exception:  # noqa: BLE001 - the line's text is a courtesy
            text = ""
    return Hang(stage, module, function, limit, file, line, text)


def _frame(output: str, module: str) -> tuple[str, int | None]:
    """The innermost frame of the child's last stack dump in `module`, else in its folder, else any."""
    dump = output.rsplit("Timeout (", 1)
    if len(dump) < 2:
        return "", None
    frames = [(m["file"], int(m["line"])) for m in map(_FRAME.match, dump[1].splitlines()) if m]
    folder = str(Path(module).parent)
    for wanted in (
        lambda f: f == module,
        lambda f: f.startswith(folder + "/"),
        lambda f: not f.startswith("<"),
    ):
        for f, n in frames:
            if wanted(f):
                return f, n
    return "", None


def _collect(
    spec: Calls,
    result_dir: Path,
    rc: int | None,
    hang: Hang | None,
    output: str,
    limits: Any,
    wall: float,
) -> CallsResult:
    out = CallsResult([], log=output, wall_s=wall, hang=hang)
    imported = _read_json(result_dir / "import.json")
    out.imported = isinstance(imported, dict) and bool(imported.get("ok"))
    if isinstance(imported, dict) and not imported.get("ok"):
        out.import_error = (
            f"importing {Path(spec.module).name} failed: {str(imported.get('error', '?'))[:2000]}"
        )
    stopped = ""
    for i, call in enumerate(spec.calls):
        if out.import_error:
            out.results.append(PythonResult(False, error=out.import_error, log=output))
            out.warnings.append([])
            continue
        if stopped:
            out.results.append(PythonResult(False, error=f"{NOT_RUN}{stopped}", log=output))
            out.warnings.append([])
            continue
        folder = result_dir / f"call-{i}"
        found = _read_json(folder / "result.json")
        if not isinstance(found, dict):  # the child stopped in or before this call
            if hang is not None:
                stopped = hang.describe()
            elif rc is not None and rc != 0:
                stopped = _crash_message(rc, f" while calling {call.function}", output, limits)
            else:
                stopped = "the child returned no result"
            out.results.append(PythonResult(False, error=stopped, log=output))
            out.warnings.append([])
            continue
        warned = found.get("warnings")
        out.warnings.append([str(w)[:500] for w in warned][:20] if isinstance(warned, list) else [])
        out.results.append(_read_call(call, folder, found, output))
    return out


def _read_call(call: Call, folder: Path, found: dict[str, Any], output: str) -> PythonResult:
    if not found.get("ok"):
        return PythonResult(False, error=str(found.get("error", "failed"))[:2000], log=output)
    arrays: dict[str, np.ndarray] = {}
    named: dict[str, Any] = {}
    returned = None
    try:
        for name, value in call.args.items():
            if isinstance(value, np.ndarray):
                got = np.load(folder / f"arg-{name}.npy", allow_pickle=False)
                if got.dtype != value.dtype or got.shape != value.shape:
                    return PythonResult(False, error=f"{name} changed its dtype or shape", log=output)
                arrays[name] = got
        keys = found.get("keys")
        if isinstance(keys, list):  # a returned dict (an example's arguments)
            if not all(isinstance(k, str) and k.isidentifier() for k in keys):
                return PythonResult(False, error=f"{call.function} did not return a dict by name", log=output)
            python = found.get("python") or ()
            for k in keys:
                value = np.load(folder / f"ret-{k}.npy", allow_pickle=False)
                named[k] = (
                    value.item() if (k in python and not value.ndim) else (value if value.ndim else value[()])
                )
        elif found.get("returned"):
            returned = np.load(folder / "return.npy", allow_pickle=False)
    except (OSError, ValueError) as err:
        return PythonResult(False, error=f"unreadable result: {err}", log=output)
    return PythonResult(True, arrays, returned, named, log=output)


__all__ = ["Call", "Calls", "CallsResult", "Hang", "run_calls"]
