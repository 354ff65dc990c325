"""Isolated execution: every compile and every run of user or generated code happens in a child process.

The harness (validation, benchmarking) never calls a backend's `compile`/`load`/launch in its own
process.  It describes the work as a :class:`Job` (plain data, picklable) and calls
:func:`run_job`, which runs it in a fresh child process with a timeout and returns a
:class:`JobResult`: an infinite loop, a crash (segfault, abort) or an out-of-memory in the
child becomes a result with ``stage`` "timeout" / "crash" and the log, never an exception in
the parent and never a hung porter.

Every child is confined by :mod:`porter.sandbox` (its own session, death with porter, resource limits,
bubblewrap where it works, no network, Landlock, and a seccomp filter installed before the binary is
loaded).  Results come back as a JSON document plus ``.npy`` arrays (never pickle), read with
``allow_pickle=False`` and checked against the dtypes and shapes the parent asked for; comparisons and
verdicts happen in the parent only, so a kernel that corrupts its own process cannot forge a verdict.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import numpy as np
from porter.backends import (
    Availability,
    CompileOptions,
    Device,
    HardwareFacts,
    ResourceReport,
    get_backend,
    guards,
    spares,
)

from porter import sandbox
from porter.sandbox.environment import ONE_BLAS_THREAD


@dataclass(frozen=True)
class LocalBuffer:
    """An OpenCL `__local` kernel argument of `nbytes` (e.g. the translation of `extern __shared__`)."""

    nbytes: int


@dataclass(frozen=True)
class Alias:
    """The device buffer of the array argument at position `index` of the same job, passed again: at
    its start (an in-place kernel called as ``k(d, d, n)``: two parameters, one allocation) or
    `offset` bytes into it (``k(d, d + n, n)``, a stencil on ``a + 1`` and ``a``: pointers into one
    allocation).  The child passes one buffer and pointers into it -- pointer arithmetic on the CPU
    emulator and CuPy, a sub-buffer or a shared-virtual-memory pointer on OpenCL -- never a copy."""

    index: int
    offset: int = 0  # bytes from the start of the array argument `index`


# A kernel argument: an array (copied to a fresh device buffer for each run), a NumPy scalar
# (np.int32(5), np.float32(0.5): its dtype is the C type passed; a structured scalar for a struct by
# value), a LocalBuffer, or an Alias of an array argument.
ArgValue = np.ndarray | np.generic | LocalBuffer | Alias


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
    # Rounds, all in the one child (timed_rounds): after `repeats` launches, as many again (up to `max_runs` in
    # all) until the interquartile range over the median is at most `target_rel_iqr` or moves by less than
    # `settle` between rounds; max_runs at most `repeats`: exactly `repeats` launches.
    max_runs: int = 0
    target_rel_iqr: float = 0.05
    settle: float = 0.01


def relative_iqr(times_ms: Sequence[float]) -> float:
    """The interquartile range over the median (linear interpolation between order statistics); inf when the
    median is not positive."""
    q1, med, q3 = np.percentile(np.asarray(times_ms, dtype=np.float64), [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else math.inf


def timed_rounds(plan: TimingPlan, launch: Callable[[int], float]) -> tuple[list[float], int]:
    """The times of `launch(i)` (the i-th timed launch, in ms) in rounds by `plan` (TimingPlan's rounds), and
    how many rounds ran; stops early once ``plan.max_seconds`` of device time is spent.  One child runs every
    round, so a timing costs one process, one compile and one driver start however noisy the device is."""
    times: list[float] = []
    budget_ms, rounds, previous = plan.max_seconds * 1000.0, 0, None
    want = max(1, plan.repeats)
    while True:
        rounds += 1
        for _ in range(want):
            times.append(float(launch(len(times))))
            if sum(times) > budget_ms:
                return times, rounds
        if len(times) >= plan.max_runs:
            return times, rounds
        rel = relative_iqr(times)
        if rel <= plan.target_rel_iqr or (previous is not None and abs(rel - previous) < plan.settle):
            return times, rounds
        previous, want = rel, min(len(times), plan.max_runs - len(times))


@dataclass(frozen=True)
class Launches:
    """Several launches over named device buffers, in order (a lifted Python function's run): each
    ``(kernel, grid, block, shared bytes, args)`` with ``kernel`` an index into ``kernels`` (source,
    entry) and each argument a buffer's name or a NumPy scalar.  Every run starts from fresh copies of
    ``buffers``; ``read_back`` names the buffers that come back."""

    kernels: tuple[tuple[str, str], ...]
    buffers: dict[str, np.ndarray]
    steps: tuple[tuple[int, tuple[int, ...], tuple[int, ...], int, tuple[Any, ...]], ...]
    read_back: tuple[str, ...]


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
    # Command prefix for the child, e.g. oclgrind_wrapper(...) for a checking run.  "{scratch}" in an
    # element stands for the job's scratch folder, the only place a sandboxed child may write.
    wrapper: tuple[str, ...] = ()
    collect: tuple[str, ...] = ()  # files of the scratch folder whose text comes back (JobResult.files)
    # Memory limit of the whole child (its compilers and checkers included), in MiB: the address space
    # on CPU devices, the emulator and checkers; the data segment on GPUs (drivers reserve huge virtual
    # ranges).  None: 80% of RAM (porter.sandbox.limits_for), so a runaway allocation is a reported
    # failure, not the OOM killer.  0: never limit.
    memory_limit_mb: int | None = None
    # Module globals set after load and before every run (and before the timed launches), through
    # the backend's `set_symbol(program, name, array)`: cudaMemcpyToSymbol of `__constant__` data.
    symbols: dict[str, np.ndarray] = field(default_factory=dict)
    # Those of `symbols` that are texture references: bound to their array through the backend's
    # `bind_texture(program, name, array)` instead.
    textures: tuple[str, ...] = ()
    # Instead of one launch of `source`/`entry`: sequences of launches (args, grid, block unused), one
    # per input set, each from its own buffers; a run's outputs are every set's read-backs in order
    launches: tuple[Launches, ...] = ()
    # What a write past an array is reported against: by the argument's position (str(i)), or for
    # `launches` by "set:buffer", its name and its own elements (the rest of the array being the
    # caller's poisoned guard).  Arrays not named here: "argument N" and the whole array.
    names: dict[str, tuple[str, int]] = field(default_factory=dict)
    # The CPU emulator's warp shuffles that read a lane CUDA leaves undefined (outside the caller's mask,
    # exited, beyond the block) read a poison pattern instead of 0 (CpuProgram.set_undefined_lanes): the
    # run that tells whether a result depends on them (porter.harness.checks.check_defined).
    poison_undefined_lanes: bool = False
    # On a host-memory device (the CPU emulator, an OpenCL CPU device): the guard zones around its buffers hold
    # this byte and may be read, a write there still faults (0: no access at all, a read is a guard hit).  Two
    # runs with two bytes tell whether a kernel that reads out of bounds computes a result that depends on what
    # it reads there (porter.harness.validate: srad's read of J[-cols] that it overwrites).
    readable_guards: int = 0
    # On a host-memory device: the buffers' pages read-only while each launch runs (porter.backends.guards.watch),
    # so the child tells whether the kernel stored into any argument at all -- even the value already there
    # (JobResult.first_write): a launch that changed nothing tells a kernel that writes nothing from one that
    # writes what each element holds.
    watch_writes: bool = False
    # An open file descriptor of the parent's, passed to the child under the same number: the lock file of
    # the job's device (porter.backends.device_locks, opened by porter.harness.contention).  A timing child
    # holds it from its kernel's load to its last timed launch, so the compiles and context set-ups of
    # timings on one GPU overlap and what they run there does not.  None: nothing to hold (the job takes a
    # waiting spare child as any other).
    device_lock_fd: int | None = None
    # Further launches of the same kernel run in the same child after this job's (one compile, one load, one
    # driver start): each a Job with this one's backend, source, entry, options and device, its own arguments,
    # geometry, seed, module globals and read-back, run ``runs`` times; no timing, wrapper or launch sequences.
    # JobResult.outputs holds this job's runs, then each further launch's, in order.
    sets: tuple[Job, ...] = ()


@dataclass(frozen=True)
class GuardHit:
    """A child that died on the guard zone around an array (porter.backends.guards), as the parent
    located it: the argument's name, the element faulted on counted from its first (negative: before
    it), its own elements, and the access ("write", "read" or "access")."""

    argument: str
    element: int
    length: int
    access: str


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
    files: dict[str, str] = field(default_factory=dict)  # Job.collect: name -> text (bounded)
    # the sandbox layers the child had in place when it loaded the binary, as the child reported them
    layers: list[str] = field(default_factory=list)
    guard: GuardHit | None = None  # stage "guard": the child died on an array's guard zone
    # the first warp shuffle of the runs that read a lane CUDA leaves undefined, in words (the CPU
    # emulator's CpuProgram.undefined_reads); "" when none did or the backend cannot tell
    undefined: str = ""
    rounds: int = 0  # rounds of timed launches the child ran (TimingPlan's rounds)
    # Job.watch_writes: the first store of the runs into an argument, "argument I, byte B" ("" when none);
    # CANNOT_WATCH where the child could not watch its buffers
    first_write: str = ""


CANNOT_WATCH = "cannot watch"  # JobResult.first_write of a child that could not watch (guards.watch failed)


# Bounds on the child output kept in JobResult.log: the head (first errors) and the tail (last words).
LOG_HEAD = 16 * 1024
LOG_TAIL = 48 * 1024

CHILD_MODULE = "porter.backends._child"
WAITING = "waiting"  # the child's stage while it waits for its device's lock (Job.device_lock_fd)


def run_job(job: Job, timeout_s: float = 60.0) -> JobResult:
    """Run `job` in a fresh, sandboxed child process group; whatever happens there comes back as a
    JobResult.

    The timeout covers the whole job (compile, load, runs, timing).  On timeout the whole process group
    is killed (the compiler or a checker under `job.wrapper` included).  Never raises for anything the
    child does.  Inside :func:`porter.backends.spares.warm_children` the child may be one started
    earlier for a job like this one (same backend, device, limits, folders, environment) and waiting
    for it; it still runs this job only.
    """
    from porter.cache import ENV_DISABLE, settle_outbox

    start = time.monotonic()
    key = _spare_key(job, timeout_s) if job.device_lock_fd is None else None  # a spare lacks the lock fd
    spare = spares.take(key) if key is not None else None
    if job.timing is not None:  # timed launches: no child warming up beside them
        spares.settle()
    elif key is not None:  # the next job of this kind finds a child already up
        spares.refill(key, lambda: _start_spare(key, job, timeout_s))
    if spare is not None and not spare.alive():  # it died while waiting: this job starts its own child
        spare.stop()
        spare = None
    work = spare.work if spare is not None else spares.new_work()
    try:
        job_file, result_dir, progress_file, log_file = (
            work / "job.pkl",
            work / "result",
            work / "progress.json",
            work / "output.log",
        )
        try:  # parent -> child only: the child trusts what its parent wrote
            job_file.write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            if spare is not None:
                spare.stop()
            return JobResult(ok=False, stage="load", error=f"cannot hand the job to a child process: {err}")
        rc: int | None
        if spare is not None:
            plan = spare.plan
            _go(spare)  # a child that died meanwhile: its exit status says so
            rc = _wait(spare.proc, timeout_s)
            spare.log.close()
        else:
            kind = job.device.kind if job.device is not None else None
            plan = child_plan(work, kind, timeout_s, job.memory_limit_mb, job.options.include_dirs)
            wrapper = [part.replace("{scratch}", str(work)) for part in job.wrapper]
            cmd = [
                *wrapper,
                sys.executable,
                "-m",
                CHILD_MODULE,
                "job",
                str(job_file),
                str(result_dir),
                _tag(job),
            ]
            fds = () if job.device_lock_fd is None else (job.device_lock_fd,)
            env = {**ONE_BLAS_THREAD, **job.env, "PORTER_PROGRESS_FILE": str(progress_file)}
            rc = _spawn(cmd, env, work, timeout_s, log_file, plan, pass_fds=fds)
        output = read_bounded(log_file)
        progress = _read_progress(progress_file)
        result = read_result(result_dir, job) if rc is not None else None
        files = {name: read_bounded(work / name) for name in job.collect if (work / name).is_file()}
        fault = read_bounded(work / guards.FAULT_FILE, head=64, tail=0) if rc is not None else ""
        forged = settle_outbox(plan.cache)  # what it compiled signed into the cache; what it used checked
        wall = time.monotonic() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if forged and job.env.get(ENV_DISABLE) != "1":  # it ran on a cache entry that failed its signature
        return run_job(replace(job, use_cache=False, env={**job.env, ENV_DISABLE: "1"}), timeout_s)

    where = _where(progress) + _on(job, progress)
    if rc is None:
        result = JobResult(
            ok=False,
            stage="timeout",
            error=f"timed out: exceeded the {timeout_s:g} s limit{where}; the process group was killed",
        )
    elif result is None:
        hit = guard_hit(job, rc, fault, progress)
        if hit is not None:
            result = JobResult(ok=False, stage="guard", error=_guard_message(hit, where), guard=hit)
        else:
            result = JobResult(ok=False, stage="crash", error=_crash_message(rc, where, output, plan.limits))
    if result.stage in ("timeout", "crash", "guard"):
        result.toolchain = result.toolchain or str(progress.get("toolchain", ""))
        result.compile_s = result.compile_s or float(progress.get("compile_s", 0.0))
        result.cached = result.cached or bool(progress.get("cached", False))
    result.returncode = rc
    result.wall_s = wall
    result.files = files
    if output.strip():
        result.log = (
            f"{result.log.rstrip()}\n--- child output ---\n{output}" if result.log.strip() else output
        )
    return result


def prestart(job: Job, timeout_s: float = 60.0) -> None:
    """Start a spare for jobs like `job` (its backend, device, options and environment matter, not its
    kernel) now, so the first such job does not wait for it; nothing outside
    :func:`porter.backends.spares.warm_children`."""
    key = _spare_key(job, timeout_s)
    if key is not None:
        spares.refill(key, lambda: _start_spare(key, job, timeout_s))


def _spare_key(job: Job, timeout_s: float) -> tuple[Any, ...] | None:
    """What a waiting child must share with `job` to run it: everything its start depended on.  None
    for a job under a checker's wrapper (the wrapper starts the child)."""
    if job.wrapper:
        return None
    return (
        job.backend,
        repr(job.device),
        float(timeout_s),
        job.memory_limit_mb,
        tuple(job.options.include_dirs),
        tuple(sorted(job.env.items())),
    )


def _start_spare(key: tuple[Any, ...], job: Job, timeout_s: float) -> spares.Spare | None:
    """A child started in the plan `job` would get, warming up for its backend and device."""
    work = spares.new_work()
    kind = job.device.kind if job.device is not None else None
    plan = child_plan(work, kind, timeout_s, job.memory_limit_mb, job.options.include_dirs)
    warm = spares.write_warm(work, Job(backend=job.backend, source="", entry="", device=job.device))
    cmd = [
        sys.executable,
        "-m",
        CHILD_MODULE,
        "serve",
        str(warm),
        str(work / "job.pkl"),
        str(work / "result"),
        _tag(job),
    ]
    env = {**ONE_BLAS_THREAD, **job.env, "PORTER_PROGRESS_FILE": str(work / "progress.json")}
    started = _start(cmd, env, work, work / "output.log", plan, stdin=subprocess.PIPE)
    if isinstance(started, int):
        shutil.rmtree(work, ignore_errors=True)
        return None
    proc, log, plan = started
    return spares.Spare(key, work, proc, log, plan)


def _tag(job: Job) -> str:
    """What the child's command line says of its job, for a reader of the process list (bench/cpu_breakdown.py
    sums CPU by it): the backend and the kind of device, ``cuda/gpu``, ``opencl/cpu``, ``cpu/emulator``,
    ``hip/compile``.  The child ignores it."""
    return f"{job.backend}/{job.device.kind if job.device is not None else 'compile'}"


def _go(spare: spares.Spare) -> None:
    """Tell a waiting child its job is in its folder."""
    stdin = spare.proc.stdin
    if stdin is not None:
        with contextlib.suppress(OSError):  # it died meanwhile: its exit status tells
            stdin.write(b"go\n")
            stdin.close()


@dataclass
class PythonResult:
    """What a Python function did to its arguments, from a sandboxed child: the array arguments after
    the call (by name), its return value (an array or a 0-d array of a number; None when it returned
    None), or why it could not run."""

    ok: bool
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    returned: np.ndarray | None = None
    mapping: dict[str, Any] = field(default_factory=dict)  # a returned dict (an example's arguments)
    error: str = ""
    log: str = ""
    wall_s: float = 0.0


def probe_backend(name: str, timeout_s: float = 60.0) -> Availability:
    """`get_backend(name).availability()` in a child process: an import error, a crash in a driver or a
    hang becomes an Availability that can neither compile nor run, with the reason as its hint."""
    with tempfile.TemporaryDirectory(prefix="porter-probe-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        result_file, log_file = work / "result.json", work / "output.log"
        # a probe opens GPU drivers for the first time, which fails under Landlock and seccomp
        plan = child_plan(work, "gpu", timeout_s, None, (), without=sandbox.PROBE_WITHOUT, outbox=False)
        cmd = [sys.executable, "-m", CHILD_MODULE, "probe", name, str(result_file)]
        rc = _spawn(cmd, dict(ONE_BLAS_THREAD), work, timeout_s, log_file, plan)
        found = _read_json(result_file)
        output = read_bounded(log_file, head=2048, tail=2048)
    if isinstance(found, dict) and isinstance(found.get("availability"), dict):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return availability_from_json(found["availability"])
    if isinstance(found, dict) and isinstance(found.get("error"), str):  # the child's one-line reason
        reason = found["error"]
    elif rc is None:
        reason = f"probing the backend timed out after {timeout_s:g} s"
    else:
        reason = _crash_message(rc, "", output, plan.limits) if rc else "the probe returned no result"
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
    details = (last,) if last and last not in reason else ()
    return Availability(name=name, compile=False, run=False, toolchain="", hint=reason, details=details)


def child_plan(
    work: Path,
    kind: str | None,
    timeout_s: float,
    memory_mb: int | None,
    include_dirs: Sequence[str],
    without: Sequence[str] = (),
    outbox: bool = True,
) -> sandbox.Plan:
    """The sandbox plan of one child: its scratch folder, the compile cache, the headers it may read.
    The shared compile cache is only read; what the child compiles goes to its private outbox (`outbox`:
    it compiles), which the parent signs into the cache afterwards (:func:`porter.cache.settle_outbox`)."""
    from porter.cache import default_root, make_outbox

    cache = default_root()
    with contextlib.suppress(OSError):  # a rule needs the folder to exist: the child reads it
        cache.mkdir(parents=True, exist_ok=True)
    return sandbox.Plan(
        scratch=str(work),
        cache=make_outbox() if outbox else "",
        readable=(*(str(Path(d).resolve()) for d in include_dirs), *([str(cache)] if cache.is_dir() else [])),
        limits=sandbox.limits_for(kind, timeout_s, memory_mb),
        disabled=(*sandbox.disabled(), *without),
        required=sandbox.required_by_env(),
    )


# ------------------------------------------------------------------------------- helpers


def _child_env(extra: dict[str, str], work: Path, plan: sandbox.Plan) -> dict[str, str]:
    """The child's environment: the sandbox's allow-list (never porter's own environment, where API
    keys live), then what porter sets for the job."""
    from porter.cache import child_env as cache_env
    from porter.sandbox.environment import scrubbed

    scratch = work / "tmp"
    return scrubbed(str(scratch), {
        **extra,
        sandbox.PLAN_ENV: plan.to_env(),
        # caches of the runtimes go to the scratch folder (porter's own compile cache is separate)
        "POCL_CACHE_DIR": str(scratch / "pocl"),
        # PoCL finishes a kernel by starting a linker, which the seccomp filter forbids once code is
        # loaded: its kernels are linked at build time (the compile step asks for the program's
        # binaries, before the filter) for any work-group size, and not again per launch geometry
        "POCL_WORK_GROUP_SPECIALIZATION": "0",
        "CUPY_CACHE_DIR": str(scratch / "cupy"),
        "CUDA_CACHE_PATH": str(scratch / "nv"),
        "XDG_CACHE_HOME": str(scratch / "xdg"),  # pytools' (pyopencl's) invoker cache and the like
        **cache_env(plan.cache),  # the shared cache (read) and the child's outbox
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONFAULTHANDLER": "1",  # a Python stack in the log when the child dies of a signal
        "PYTHONUNBUFFERED": "1",  # and everything it printed before
    })  # fmt: skip


def _spawn(
    cmd: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    timeout_s: float,
    log_file: Path,
    plan: sandbox.Plan,
    pass_fds: tuple[int, ...] = (),
) -> int | None:
    """Run `cmd` in its own session inside the sandbox, output to `log_file` (`pass_fds`: the parent's
    descriptors it inherits).  The exit status, or None after a timeout."""
    started = _start(cmd, env, cwd, log_file, plan, stdin=subprocess.DEVNULL, pass_fds=pass_fds)
    if isinstance(started, int):
        return started
    proc, log, _ = started
    try:
        return _wait(proc, timeout_s)
    finally:
        log.close()


def _start(
    cmd: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    log_file: Path,
    plan: sandbox.Plan,
    stdin: int,
    pass_fds: tuple[int, ...] = (),
) -> tuple[subprocess.Popen[bytes], IO[bytes], sandbox.Plan] | int:
    """`cmd` started in its own session inside the sandbox (output to `log_file`, left open with the
    process), or 127 when it cannot start."""
    (cwd / "tmp").mkdir(exist_ok=True)
    wrapped, plan = sandbox.wrap_command(cmd, plan)
    log = open(log_file, "wb")  # noqa: SIM115 - closed by the caller when the child is done
    try:
        proc = subprocess.Popen(
            wrapped,
            stdin=stdin,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=_child_env(env, cwd, plan),
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as err:
        log.write(f"cannot start {wrapped[0]}: {err}\n".encode())
        log.close()
        return 127
    return proc, log, plan


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """The child's exit status, or None after `timeout_s` (its whole group then killed)."""
    try:
        return proc.wait(timeout=max(timeout_s, 0.001))
    except subprocess.TimeoutExpired:
        return None
    finally:
        if proc.returncode is None:  # timed out, or the parent was interrupted: take the group down
            spares.kill_group(proc)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_OOM_WORDS = ("std::bad_alloc", "MemoryError", "Cannot allocate memory", "out of memory")


def _crash_message(rc: int, where: str, output: str = "", limits: sandbox.Limits | None = None) -> str:
    cap = limits.address_space or limits.data if limits is not None else None
    if cap and any(w in output for w in _OOM_WORDS):
        return f"out of memory: exceeded the sandbox's limit of {cap >> 20} MiB{where}"
    if rc == -signal.SIGXCPU:
        return f"timed out: exceeded the sandbox's CPU-time limit{where}; killed by SIGXCPU"
    if rc == -signal.SIGXFSZ:
        return f"crashed: wrote a file larger than the sandbox's limit{where} (SIGXFSZ)"
    if rc < 0:
        return f"crashed: killed by {signal_name(-rc)}{where}"
    if rc > 128 and rc - 128 in {s.value for s in signal.Signals}:
        # a shell or wrapper between us and the child reports a signal as 128 + n
        return f"crashed: exit status {rc} ({signal_name(rc - 128)}){where}, no result"
    return f"crashed: exit status {rc}{where}, no result"


def _guarded_arrays(job: Job) -> dict[str, np.ndarray]:
    """The arrays the child allocates with guard zones, by the tag it records them under."""
    if job.launches:
        return {f"{s}:{k}": v for s, ls in enumerate(job.launches) for k, v in ls.buffers.items()}
    return {str(i): a for i, a in enumerate(job.args) if isinstance(a, np.ndarray)}


def guard_hit(job: Job, rc: int | None, fault: str, progress: dict[str, Any]) -> GuardHit | None:
    """The array a child that died of SIGSEGV faulted beside, when what it left (its fault line and the
    buffers in its progress file: untrusted) is consistent with the arrays the parent gave it."""
    if rc not in (-signal.SIGSEGV, 128 + signal.SIGSEGV) or not fault:
        return None
    arrays = _guarded_arrays(job)
    expected = {tag: max(int(a.nbytes), 1) for tag, a in arrays.items()}
    hit = guards.locate(fault, progress.get("guards"), expected)
    if hit is None:
        return None
    array = arrays[hit.tag]
    name, length = job.names.get(hit.tag, ("", int(array.size)))
    if not name:
        name = hit.tag.split(":", 1)[1] if job.launches else f"argument {int(hit.tag) + 1}"
    return GuardHit(name, hit.offset // max(array.itemsize, 1), length, hit.access)


def _guard_message(hit: GuardHit, where: str) -> str:
    side = "before its first element" if hit.element < 0 else f"past its {hit.length} elements"
    return (
        f"out-of-bounds {hit.access} of {hit.argument}[{hit.element}], {side}: the child died on the "
        f"guard zone beside {hit.argument}{where} (SIGSEGV)"
    )


def _where(progress: dict[str, Any]) -> str:
    stage = progress.get("stage")
    if not stage:
        return " before the job started"
    if stage == WAITING:
        return " while waiting for the device (others' work on it held its lock)"
    run = progress.get("run")
    return f" during {stage}" + (f" (run {run})" if run is not None and stage == "launch" else "")


def _on(job: Job, progress: dict[str, Any]) -> str:
    """Where a child that died or hung was working: the device and its toolchain (driver and runtime
    version), so a crash names which of several devices it happened on."""
    chain = str(progress.get("toolchain", ""))
    if not chain:
        try:
            chain = get_backend(job.backend).toolchain_id(job.device)
        except Exception:  # noqa: BLE001 - a backend that cannot say: the device alone
            chain = ""
    device = job.device.label if job.device is not None else f"{job.backend} (compile only)"
    return f" on {device}" + (f" [{chain}]" if chain else "")


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


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------------------- the wire format
#
# The child writes ``result/result.json`` and one ``.npy`` per returned array; the parent reads them back
# with ``allow_pickle=False`` and checks each against the dtype and shape of the argument it belongs to.
# Nothing the child writes is ever executed or unpickled by the parent.

_RESULT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "ok": bool,
    "stage": str,
    "error": str,
    "log": str,
    "toolchain": str,
    "compile_s": (int, float),
    "cached": bool,
    "undefined": str,
    "rounds": int,
    "first_write": str,
}
_STAGES = {"done", "compile", "load", "launch", "timeout", "crash", "unavailable", "emulate", "sandbox"}


def write_result(folder: Path, result: JobResult) -> None:
    """The child's side: `result` as JSON plus arrays; the folder appears complete or not at all."""
    part = folder.with_name(folder.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    doc: dict[str, Any] = {name: getattr(result, name) for name in _RESULT_FIELDS}
    doc["times_ms"] = [float(t) for t in result.times_ms]
    doc["layers"] = list(result.layers)
    doc["report"] = None if result.report is None else vars(result.report)
    doc["outputs"] = [len(run) for run in result.outputs]
    doc["timed_outputs"] = [len(run) for run in result.timed_outputs]
    for tag, runs in (("out", result.outputs), ("timed", result.timed_outputs)):
        for r, arrays in enumerate(runs):
            for i, array in enumerate(arrays):
                np.save(part / f"{tag}-{r}-{i}.npy", np.ascontiguousarray(array), allow_pickle=False)
    (part / "result.json").write_text(json.dumps(doc), encoding="utf-8")
    os.replace(part, folder)


def read_result(folder: Path, job: Job) -> JobResult | None:
    """The parent's side: the child's result, or None when it is missing, torn or malformed."""
    doc = _read_json(folder / "result.json")
    if not isinstance(doc, dict):
        return None
    try:
        fields: dict[str, Any] = {}  # each value checked against its kind just below
        for name, kind in _RESULT_FIELDS.items():
            value = doc[name]
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                return None
            fields[name] = value
        if fields["stage"] not in _STAGES:
            return None
        times = doc["times_ms"]
        if not isinstance(times, list) or not all(isinstance(t, (int, float)) for t in times):
            return None
        layers = doc.get("layers", [])
        if not isinstance(layers, list) or not all(n in sandbox.LAYER_NAMES for n in layers):
            return None
        report = doc["report"]
        result = JobResult(
            **fields,
            times_ms=[float(t) for t in times],
            layers=list(layers),
            report=ResourceReport(**report) if isinstance(report, dict) else None,
        )
        expect = _expected_arrays(job)
        # a job carrying further launches (Job.sets): its runs, then each launch's, each with its own arrays
        per_run = [_expected_arrays(one) for one in (job, *job.sets) for _ in range(one.runs)]
        if job.sets and fields["ok"] and len(doc["outputs"]) != len(per_run):
            raise ValueError("runs missing")
        result.outputs = _read_arrays(
            folder, "out", doc["outputs"], per_run.__getitem__ if job.sets else lambda _r: expect
        )
        result.timed_outputs = _read_arrays(folder, "timed", doc["timed_outputs"], lambda _r: expect)
    except (KeyError, IndexError, TypeError, ValueError, OSError):
        return None
    return result


def _expected_arrays(job: Job) -> list[tuple[np.dtype, tuple[int, ...]]]:
    if job.launches:
        return [
            (ls.buffers[k].dtype, tuple(ls.buffers[k].shape)) for ls in job.launches for k in ls.read_back
        ]
    arrays = [i for i, a in enumerate(job.args) if isinstance(a, np.ndarray)]
    picked = arrays if job.read_back is None else [i for i in job.read_back if i in arrays]
    return [(job.args[i].dtype, tuple(job.args[i].shape)) for i in picked]


def _read_arrays(
    folder: Path,
    tag: str,
    counts: Any,
    expect: Callable[[int], list[tuple[np.dtype, tuple[int, ...]]]],
) -> list[list[np.ndarray]]:
    """The arrays of each run, each checked against the dtype and shape `expect` gives for that run."""
    if not isinstance(counts, list):
        raise ValueError("array counts")
    runs = []
    for r, count in enumerate(counts):
        mine = expect(r)
        if count != len(mine):
            raise ValueError("wrong number of arrays")
        arrays = []
        for i, (dtype, shape) in enumerate(mine):
            array = np.load(folder / f"{tag}-{r}-{i}.npy", allow_pickle=False)
            if array.dtype != dtype or tuple(array.shape) != shape:
                raise ValueError("array of the wrong dtype or shape")
            arrays.append(array)
        runs.append(arrays)
    return runs


def availability_to_json(a: Availability) -> dict[str, Any]:
    from porter.model import to_jsonable

    doc: dict[str, Any] = to_jsonable(a)
    return doc


def availability_from_json(doc: dict[str, Any]) -> Availability:
    devices = tuple(
        Device(**{**{k: v for k, v in d.items() if k != "facts"}, "facts": HardwareFacts(**d["facts"])})
        for d in doc["devices"]
    )
    for name in ("name", "toolchain", "hint"):
        if not isinstance(doc[name], str):
            raise ValueError(name)
    return Availability(
        name=doc["name"],
        compile=bool(doc["compile"]),
        run=bool(doc["run"]),
        toolchain=doc["toolchain"],
        devices=devices,
        hint=doc["hint"],
        details=tuple(str(d) for d in doc["details"]),
    )
