"""The child side of :mod:`porter.backends.isolate`: ``python -m porter.backends._child MODE ...``.

Modes:

* ``job JOB_PICKLE RESULT_DIR``: compile (through the cache), load, run and time one Job; write a
  JobResult as JSON plus ``.npy`` arrays (:func:`porter.backends.isolate.write_result`).  Every failure the backend reports becomes a JobResult with its stage; a crash or a hang
  is seen by the parent (no result file / the timeout), with the stage this child last announced in
  ``$PORTER_PROGRESS_FILE``.
* ``serve WARM_PICKLE JOB_PICKLE RESULT_DIR``: a spare (:mod:`porter.backends.spares`): import the
  backend of the Job in WARM_PICKLE and warm up its device, wait for ``go`` on standard input, then run
  the job in JOB_PICKLE exactly as ``job`` mode does (sandbox entered after the warm-up, as there).
* ``probe NAME RESULT_JSON``: write ``get_backend(NAME).availability()`` (or a one-line reason).
* ``calls CALLS RESULT_DIR``: import a Python module once and call its functions in turn, each stage
  announced and its stack dumped before its limit (:mod:`porter.backends.pycall`).

The child confines itself as the parent's :class:`porter.sandbox.Plan` says: limits, network and the
compile-time file-system layer first (:func:`porter.sandbox.enter`), then, right before the binary is
loaded, writes only to the scratch folder and the seccomp filter (:func:`porter.sandbox.lock_down`).
A GPU job first initialises its driver (:func:`warm_up`): the first cuInit fails under Landlock and
seccomp, what follows it does not (measured on the H200, bench/sandbox_cuda_probe.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import faulthandler
import inspect
import json
import os
import pickle
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from porter.backends import (
    Backend,
    CannotEmulate,
    CompileError,
    Device,
    Program,
    ToolchainMissing,
    device_locks,
    get_backend,
    guards,
)
from porter.backends.binaries import compile_cached
from porter.backends.isolate import (
    CANNOT_WATCH,
    WAITING,
    Alias,
    Job,
    JobResult,
    Launches,
    availability_to_json,
    timed_rounds,
    write_result,
)

from porter import sandbox
from porter.cache import Cache


class Progress:
    """Where the child is, written atomically to a small JSON file the parent reads after a crash/hang."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        self.state: dict[str, Any] = {}

    def update(self, **fields: Any) -> None:
        self.state.update(fields)
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(self.state), encoding="utf-8")
            os.replace(tmp, self.path)


class Failed(Exception):
    """Ends the job early with a result (stage, error, log)."""

    def __init__(self, stage: str, error: str, log: str = ""):
        super().__init__(error)
        self.stage, self.error, self.log = stage, error, log


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _classify(err: Exception, stage: str) -> Failed:
    """The stage a backend exception belongs to."""
    if isinstance(err, CannotEmulate):
        return Failed("emulate", str(err) or "cannot emulate")
    if isinstance(err, ToolchainMissing):
        return Failed("unavailable", str(err) or "toolchain missing")
    if isinstance(err, MemoryError):
        return Failed(stage, f"out of memory during {stage}", traceback.format_exc())
    return Failed(stage, _one_line(err), traceback.format_exc())


# ------------------------------------------------------------------------------- the job


def execute(job: Job, progress: Progress) -> JobResult:
    result = JobResult(ok=False, stage="unavailable")
    try:
        _execute(job, progress, result)
    except Failed as failed:
        result.ok, result.stage, result.error = False, failed.stage, failed.error
        result.log = failed.log if not result.log else f"{result.log.rstrip()}\n{failed.log}".strip()
        return result
    result.ok, result.stage = True, "done"
    return result


def _execute(job: Job, progress: Progress, result: JobResult) -> None:
    progress.update(stage="unavailable")
    try:
        backend = get_backend(job.backend)
    except KeyError as err:
        raise Failed("unavailable", str(err).strip("'\"")) from None
    except Exception as err:  # noqa: BLE001 - an import error in a backend is "unavailable"
        raise Failed("unavailable", f"backend {job.backend} cannot be loaded: {_one_line(err)}") from None

    if job.device is not None:  # found and probed by the parent (trusted): not again here
        with contextlib.suppress(Exception):
            backend.adopt(job.device)
    if job.launches:
        _execute_launches(job, job.launches, backend, progress, result)
        return
    progress.update(stage="compile")
    start = time.perf_counter()
    if job.poison_undefined_lanes and backend.poison_lanes_flags:  # poisoned by its build, not at run time
        flags = (*job.options.flags, *backend.poison_lanes_flags)
        job = dataclasses.replace(job, options=dataclasses.replace(job.options, flags=flags))
    try:
        if job.use_cache:
            binary, cached = compile_cached(backend, job.source, job.entry, job.options, job.device, Cache())
        else:
            binary, cached = backend.compile(job.source, job.entry, job.options, job.device), False
    except CompileError as err:
        raise Failed("compile", err.render().splitlines()[0], err.log) from None
    except Exception as err:  # noqa: BLE001 - every compile failure is data
        raise _classify(err, "compile") from None
    result.compile_s = time.perf_counter() - start
    result.cached = cached
    result.toolchain = binary.toolchain
    result.report = binary.report
    result.log = binary.log
    progress.update(toolchain=binary.toolchain, compile_s=result.compile_s, cached=cached)
    if job.device is None:
        return
    with device_lock(job, progress):
        _execute_loaded(job, backend, binary, progress, result)


def _execute_loaded(job: Job, backend: Backend, binary: Any, progress: Progress, result: JobResult) -> None:
    """`binary` loaded on the job's device, its runs and its timed launches."""
    device = job.device
    assert device is not None
    progress.update(stage="load")
    _arm_guards(job, result)
    plan = sandbox.current_plan()
    if plan is not None:
        try:
            sandbox.lock_down(plan)  # before any code porter did not write is loaded
        except sandbox.SandboxError as err:
            raise Failed("sandbox", str(err)) from None
        result.layers = sorted(sandbox.state().active)
    try:
        program = backend.load(binary, device)
    except Exception as err:  # noqa: BLE001
        raise _classify(err, "load") from None

    launcher = Launcher(backend, program, job, progress)
    if job.symbols:  # a missing symbol is a load failure, before any launch
        progress.update(stage="load")
        try:
            launcher.set_symbols()
        except Failed:
            raise
        except Exception as err:  # noqa: BLE001
            raise _classify(err, "load") from None
    if job.poison_undefined_lanes and not backend.poison_lanes_flags:
        poison = getattr(program, "set_undefined_lanes", None)
        if poison is None:
            raise Failed("load", f"backend {job.backend} cannot poison undefined warp-shuffle lanes")
        poison(True)
    for k, one in enumerate((job, *job.sets)):  # the job's launch, then the further launches it carries
        runner = launcher if one is job else Launcher(backend, program, one, progress)
        for run in range(one.runs):
            progress.update(stage="launch", run=run, set=k)
            try:
                result.outputs.append(runner.run_once(one.seed + run))
            except Exception as err:  # noqa: BLE001
                raise _classify(err, "launch") from None
            finally:
                result.undefined = result.undefined or str(getattr(program, "undefined_reads", "") or "")
                result.first_write = result.first_write or runner.first_write

    if job.timing is not None:
        progress.update(stage="timing", run=None)
        try:
            result.times_ms, result.rounds = launcher.time()
            if job.timing.read_back > 0:
                result.timed_outputs = launcher.read_timed_sets(job.timing.read_back)
        except Exception as err:  # noqa: BLE001
            raise _classify(err, "launch") from None


@contextlib.contextmanager
def device_lock(job: Job, progress: Progress | None = None) -> Any:
    """Hold the device's lock file the parent passed (Job.device_lock_fd) exclusively from the kernel's load
    to its last timed launch: timings on one GPU, of this porter or of the other programs of a suite, never
    overlap, while their compiles and driver starts do (porter.backends.device_locks).  Released on exit."""
    if job.device_lock_fd is None:
        yield
        return
    if progress is not None:
        progress.update(stage=WAITING)
    with device_locks.exclusive(job.device_lock_fd):
        yield


def _compile(backend: Backend, job: Job, source: str, entry: str) -> tuple[Any, bool]:
    try:
        if job.use_cache:
            return compile_cached(backend, source, entry, job.options, job.device, Cache())
        return backend.compile(source, entry, job.options, job.device), False
    except CompileError as err:
        raise Failed("compile", f"{entry}: {err.render().splitlines()[0]}", err.log) from None
    except Exception as err:  # noqa: BLE001 - every compile failure is data
        raise _classify(err, "compile") from None


def _execute_launches(
    job: Job, sets: tuple[Launches, ...], backend: Backend, progress: Progress, result: JobResult
) -> None:
    """Every kernel of the sequences built once (through the cache); then each sequence's launches in
    order from fresh copies of its buffers, ``job.runs`` times; then the first sequence timed as a whole
    when asked."""
    progress.update(stage="compile")
    start = time.perf_counter()
    kernels: list[tuple[str, str]] = []
    for ls in sets:
        kernels += [k for k in ls.kernels if k not in kernels]
    binaries = []
    all_cached = True
    for source, entry in kernels:
        binary, cached = _compile(backend, job, source, entry)
        binaries.append(binary)
        all_cached = all_cached and cached
        result.log += binary.log
    result.compile_s = time.perf_counter() - start
    result.cached = all_cached
    result.toolchain = binaries[0].toolchain if binaries else ""
    progress.update(toolchain=result.toolchain, compile_s=result.compile_s, cached=all_cached)
    if job.device is None:
        return
    with device_lock(job, progress):
        _launches_loaded(job, sets, kernels, binaries, backend, progress, result)


def _launches_loaded(
    job: Job,
    sets: tuple[Launches, ...],
    kernels: list[tuple[str, str]],
    binaries: list[Any],
    backend: Backend,
    progress: Progress,
    result: JobResult,
) -> None:
    """The kernels of `sets` loaded on the job's device, their runs and their timed launches."""
    device = job.device
    assert device is not None
    progress.update(stage="load")
    _arm_guards(job, result)
    plan_ = sandbox.current_plan()
    if plan_ is not None:
        try:
            sandbox.lock_down(plan_)
        except sandbox.SandboxError as err:
            raise Failed("sandbox", str(err)) from None
        result.layers = sorted(sandbox.state().active)
    try:
        programs = [backend.load(b, device) for b in binaries]
    except Exception as err:  # noqa: BLE001
        raise _classify(err, "load") from None

    def run_all(ls: Launches, timed: bool = False) -> tuple[dict[str, Any], float]:
        s = next(n for n, one in enumerate(sets) if one is ls)
        bufs = {}
        for k, v in ls.buffers.items():
            with guards.tagged(f"{s}:{k}"):
                bufs[k] = backend.to_device(np.ascontiguousarray(v).copy(), device)
        if guards.armed():
            progress.update(guards=guards.zones())
        total = 0.0
        if device.kind == "gpu":
            backend.scrub_shared(device)
        for kernel, grid, block, shared, args in ls.steps:
            values = [bufs[a] if isinstance(a, str) else a for a in args]
            program = programs[kernels.index(ls.kernels[kernel])]
            ms = program(*values, grid=grid, block=block, shared_bytes=shared, timed=timed)
            total += float(ms or 0.0)
        backend.synchronize(device)
        return bufs, total

    for run in range(job.runs):
        progress.update(stage="launch", run=run)
        out: list[np.ndarray] = []
        try:
            for ls in sets:
                bufs, _ = run_all(ls)
                out += [
                    np.array(backend.to_host(bufs[k], ls.buffers[k].dtype, ls.buffers[k].shape), copy=True)
                    for k in ls.read_back
                ]
        except Failed:
            raise
        except Exception as err:  # noqa: BLE001
            raise _classify(err, "launch") from None
        result.outputs.append(out)
    if job.timing is not None:
        progress.update(stage="timing", run=None)
        try:
            plan = job.timing

            def one(_i: int) -> float:
                if plan.flush_l2:
                    backend.flush_cache(device)
                t0 = time.perf_counter()
                _, ms = run_all(sets[0], timed=True)
                return ms if ms > 0 else (time.perf_counter() - t0) * 1000.0

            for _ in range(plan.warmup):
                run_all(sets[0])
            result.times_ms, result.rounds = timed_rounds(plan, one)
        except Exception as err:  # noqa: BLE001
            raise _classify(err, "launch") from None


def shared_buffer(
    backend: Backend, array: np.ndarray, offsets: list[int], device: Device
) -> tuple[Any, list[Any]]:
    """`array` in one device buffer, and a kernel argument pointing each of `offsets` bytes into it: the
    backend's own ``views`` where it has one (the CPU emulator, OpenCL), else byte views of a buffer that
    is an array itself (CuPy's, for CUDA and HIP on an NVIDIA GPU: a kernel receives an array as its data
    pointer, the view's being the buffer's plus the offset).  A backend that can do neither cannot run the
    launch as captured: ToolchainMissing (the job's stage "unavailable"), never a copy that would break
    the aliasing."""
    own = getattr(backend, "views", None)
    if callable(own):
        found: tuple[Any, list[Any]] = own(array, offsets, device)
        return found
    buffer = backend.to_device(array, device)
    try:
        flat = buffer.reshape(-1).view(np.uint8)
        return buffer, [flat[int(o) :] for o in offsets]
    except (AttributeError, TypeError, ValueError):
        raise ToolchainMissing(
            f"{device.label}: backend {backend.name} cannot pass a pointer into another argument's buffer "
            f"(arguments {', '.join(map(str, offsets))} bytes into one allocation)"
        ) from None


# Devices whose buffers are this process's memory: they get guard zones (porter.backends.guards).
HOST_MEMORY_KINDS = guards.HOST_MEMORY_KINDS


def _arm_guards(job: Job, result: JobResult) -> None:
    """Guard zones around every buffer of a job on a host-memory device, and the fault handler that
    tells the parent which zone a kernel hit; before the kernel is loaded."""
    if job.device is None or job.device.kind not in HOST_MEMORY_KINDS:
        return
    try:
        why = guards.arm(Path.cwd(), readable=job.readable_guards)
    except Exception as err:  # noqa: BLE001 - zones or not, the job runs; the parent sees a plain crash
        why = _one_line(err)
    if why:
        result.log = f"{result.log.rstrip()}\nporter: guard zones without fault reports: {why}".strip()


class Launcher:
    """Fresh device buffers per run, launches with a per-run seed, timed launches."""

    def __init__(self, backend: Backend, program: Program, job: Job, progress: Progress | None = None):
        self.backend, self.program, self.job = backend, program, job
        self.progress = progress
        self.timed_sets: list[list[Any]] = []
        self.first_write = ""  # Job.watch_writes: the first store of its launches into an argument
        assert job.device is not None
        self.device: Device = job.device
        try:
            params = inspect.signature(program).parameters
            self.takes_seed = "seed" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            self.takes_seed = False
        arrays = [i for i, a in enumerate(job.args) if isinstance(a, np.ndarray)]
        self.read_back = arrays if job.read_back is None else [i for i in job.read_back if i in arrays]

    def device_args(self) -> list[Any]:
        """Every array argument copied into a freshly allocated device buffer; an Alias the buffer of
        the array it names (at its start), or a pointer `offset` bytes into that one buffer (the
        backend's ``views``: one allocation, never a copy); scalars as they are."""
        job = self.job
        offsets: dict[int, set[int]] = {}  # array argument -> the offsets other arguments point at
        for i, a in enumerate(job.args):
            if not isinstance(a, Alias):
                continue
            base = job.args[a.index] if 0 <= a.index < len(job.args) else None
            if not isinstance(base, np.ndarray):
                raise Failed("launch", f"argument {i} names argument {a.index}, which is not an array")
            if not 0 <= a.offset < max(base.nbytes, 1):
                raise Failed("launch", f"argument {i} points {a.offset} bytes into a buffer of {base.nbytes}")
            if a.offset:
                offsets.setdefault(a.index, set()).add(a.offset)
        args: list[Any] = []
        views: dict[tuple[int, int], Any] = {}
        for i, a in enumerate(job.args):
            if isinstance(a, np.ndarray):
                with guards.tagged(str(i)):
                    if i in offsets:
                        at = sorted(offsets[i])
                        buffer, pointers = shared_buffer(
                            self.backend, np.ascontiguousarray(a), at, self.device
                        )
                        views.update({(i, o): p for o, p in zip(at, pointers, strict=True)})
                        args.append(buffer)
                    else:
                        args.append(self.backend.to_device(np.ascontiguousarray(a), self.device))
            else:
                args.append(a)
        if guards.armed() and self.progress is not None:  # where each buffer lies, for the parent
            self.progress.update(guards=guards.zones())
        for i, a in enumerate(job.args):
            if isinstance(a, Alias):
                args[i] = views[(a.index, a.offset)] if a.offset else args[a.index]
        return args

    def launch(self, args: list[Any], seed: int, timed: bool = False) -> float | None:
        job = self.job
        extra: dict[str, Any] = {"seed": seed} if self.takes_seed else {}
        return self.program(
            *args, grid=job.grid, block=job.block, shared_bytes=job.shared_bytes, timed=timed, **extra
        )

    def set_symbols(self) -> None:
        """Copy the job's module globals (`__constant__` inputs) into the loaded program."""
        if not self.job.symbols:
            return
        if not self.backend.sets_symbols:
            raise Failed(
                "load", f"backend {self.job.backend} cannot set module globals (__constant__ symbols)"
            )
        bind = getattr(self.backend, "bind_texture", None)
        for name, value in self.job.symbols.items():
            if name not in self.job.textures:
                self.backend.set_symbol(self.program, name, np.ascontiguousarray(value))
            elif bind is None:
                raise Failed("load", f"backend {self.job.backend} cannot bind texture references ({name})")
            else:
                bind(self.program, name, np.ascontiguousarray(value))

    def run_once(self, seed: int) -> list[np.ndarray]:
        args = self.device_args()
        self.set_symbols()
        # GPUs keep shared memory between launches: poison it so uninitialised reads show.
        if self.device.kind == "gpu":
            self.backend.scrub_shared(self.device)
        watching = self.job.watch_writes and guards.watch()
        if self.job.watch_writes and not watching:
            self.first_write = self.first_write or CANNOT_WATCH
        try:
            self.launch(args, seed)
            self.backend.synchronize(self.device)
        finally:
            if watching:
                hit = guards.watched()
                if hit is not None and not self.first_write:
                    self.first_write = f"argument {hit[0]}, byte {hit[1]}"
        outs = []
        for i in self.read_back:
            ref = self.job.args[i]
            outs.append(np.array(self.backend.to_host(args[i], ref.dtype, ref.shape), copy=True))
        return outs

    def time(self) -> tuple[list[float], int]:
        plan = self.job.timing
        assert plan is not None
        sets = [self.device_args() for _ in range(max(1, plan.rotate))]
        self.timed_sets = sets
        self.set_symbols()
        for i in range(plan.warmup):
            self.launch(sets[i % len(sets)], self.job.seed)
        self.backend.synchronize(self.device)

        def one(i: int) -> float:
            if plan.flush_l2:
                self.backend.flush_cache(self.device)
            start = time.perf_counter()
            ms = self.launch(sets[i % len(sets)], self.job.seed, timed=True)
            if ms is None:  # the backend has no device timer: host time around launch + synchronize
                self.backend.synchronize(self.device)
                ms = (time.perf_counter() - start) * 1000.0
            return float(ms)

        return timed_rounds(plan, one)

    def read_timed_sets(self, count: int) -> list[list[np.ndarray]]:
        """The arrays of the last `count` rotated input sets, as the timed launches left them."""
        self.backend.synchronize(self.device)
        out = []
        for args in self.timed_sets[-count:]:
            arrays = []
            for i in self.read_back:
                ref = self.job.args[i]
                arrays.append(np.array(self.backend.to_host(args[i], ref.dtype, ref.shape), copy=True))
            out.append(arrays)
        return out


# ------------------------------------------------------------------------------- entry point


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(".part")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, path)


def _probe(name: str) -> dict[str, Any]:
    try:
        return {"availability": availability_to_json(get_backend(name).availability())}
    except Exception as err:  # noqa: BLE001 - reported as the backend's hint
        return {"error": f"backend {name} failed: {_one_line(err)}"}


def warm_up(job: Job) -> None:
    """Initialise the GPU driver of `job`'s device before the sandbox is entered (porter's code only:
    nothing of the job is compiled or loaded yet).  A failure here is left for the job's own stages to
    report."""
    if job.device is None or job.device.kind != "gpu":
        return
    with contextlib.suppress(Exception):
        get_backend(job.backend).synchronize(job.device)


def _enter_sandbox() -> str:
    """Confine this process as the parent planned; '' or why a required layer is missing."""
    plan = sandbox.current_plan()
    if plan is None:
        return ""
    try:
        sandbox.enter(plan)
    except sandbox.SandboxError as err:
        return str(err)
    return ""


def _line_buffer_c_stdio() -> None:
    """Line-buffer C stdout so a kernel's printf output before a crash reaches the log."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None)
        for name in ("stdout", "stderr"):
            stream = ctypes.c_void_p.in_dll(libc, name)
            libc.setvbuf(stream, None, 1, 0)  # _IOLBF


def _read_job(path: str) -> Job | None:
    job = pickle.loads(Path(path).read_bytes())  # written by the parent: trusted
    if not isinstance(job, Job):
        print(f"not a Job: {type(job).__name__}", file=sys.stderr)
        return None
    return job


def _run(job: Job, result_dir: str) -> int:
    refused = _enter_sandbox()
    if refused:
        result = JobResult(ok=False, stage="sandbox", error=refused)
    else:
        result = execute(job, Progress(os.environ.get("PORTER_PROGRESS_FILE")))
    sys.stdout.flush()
    write_result(Path(result_dir), result)
    return 0


def _import_file(path: str, name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _save_call(part: Path, function: str, args: dict[str, Any], returned: Any, doc: dict[str, Any]) -> None:
    """Every array argument after the call and what it returned (an array or a number; a dict: an
    example's arguments by name) as ``.npy`` in `part`; `doc` says what is there."""
    for name, value in args.items():
        if isinstance(value, np.ndarray):
            np.save(part / f"arg-{name}.npy", value, allow_pickle=False)
    if isinstance(returned, dict):  # an example's arguments, by name
        keys = []
        for k, v in returned.items():
            value = np.asarray(v)
            if not isinstance(k, str) or not k.isidentifier() or value.dtype == object:
                raise TypeError(
                    f"{function} returned {k!r}: not an array or a number under a parameter's name"
                )
            np.save(part / f"ret-{k}.npy", value, allow_pickle=False)
            keys.append(k)
        doc["keys"] = keys
        # Python numbers stay Python numbers (NumPy promotes them as weak scalars)
        doc["python"] = [k for k, v in returned.items() if type(v) in (int, float, bool)]
    elif returned is not None:
        value = np.asarray(returned)
        if value.dtype == object:
            raise TypeError(f"{function} returned a {type(returned).__name__}, not an array or a number")
        np.save(part / "return.npy", value, allow_pickle=False)
        doc["returned"] = True
    doc["ok"] = True


class _Stage:
    """Each stage of a ``calls`` child announced in the progress file (what, since when) with a stack dump
    armed a little before its limit, so the parent, which kills a stage that runs past it, finds where it
    hung in the log."""

    def __init__(self, progress: Progress, limit: float):
        self.progress = progress
        self.dump_after = max(0.1, limit - min(1.0, 0.25 * limit))

    def start(self, **fields: Any) -> None:
        self.progress.update(since=time.time(), **fields)
        with contextlib.suppress(Exception):
            faulthandler.dump_traceback_later(self.dump_after, exit=False)

    def end(self) -> None:
        with contextlib.suppress(Exception):
            faulthandler.cancel_dump_traceback_later()


def _run_calls(calls_file: str, result_dir: str) -> int:
    """``calls``: import a module once, then make each call in turn (:mod:`porter.backends.pycall`); each
    call's result in ``call-N/`` as soon as it returned, the import's failure in ``import.json``."""
    import warnings

    from porter.backends.pycall import Calls

    spec = pickle.loads(Path(calls_file).read_bytes())  # written by the parent: trusted
    if not isinstance(spec, Calls):
        print(f"not a Calls: {type(spec).__name__}", file=sys.stderr)
        return 2
    for job in spec.warm:  # the devices the module runs on, opened by porter's code before the sandbox
        if job.device is not None:
            with contextlib.suppress(Exception):  # one that cannot open: the module's calls say so
                get_backend(job.backend).synchronize(job.device)
    out = Path(result_dir)
    out.mkdir(parents=True, exist_ok=True)
    stage = _Stage(Progress(os.environ.get("PORTER_PROGRESS_FILE")), spec.stage_timeout_s)
    refused = _enter_sandbox()
    plan = sandbox.current_plan()
    try:
        if refused:
            raise RuntimeError(refused)
        if plan is not None:
            sandbox.lock_down(plan)
        stage.start(stage="import")
        module = _import_file(spec.module, Path(spec.module).stem)
    except BaseException as err:  # noqa: BLE001 - the module's failure is the parent's data
        stage.end()
        traceback.print_exc()
        sys.stdout.flush()
        _write_json(out / "import.json", {"ok": False, "error": f"{type(err).__name__}: {err}"})
        return 0
    stage.end()
    _write_json(out / "import.json", {"ok": True})
    for i, call in enumerate(spec.calls):
        part = out / f"call-{i}.part"
        part.mkdir(parents=True, exist_ok=True)
        doc: dict[str, Any] = {"ok": False}
        stage.start(stage="call", index=i, function=call.function)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fn = getattr(module, call.function)
                returned = fn(*call.args.values()) if call.positional else fn(**call.args)
                _save_call(part, call.function, call.args, returned, doc)
            except BaseException as err:  # noqa: BLE001 - the call's failure is the parent's data
                doc["ok"] = False
                doc["error"] = f"{type(err).__name__}: {err}"
                traceback.print_exc()
        stage.end()
        doc["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught][:20]
        sys.stdout.flush()
        (part / "result.json").write_text(json.dumps(doc), encoding="utf-8")
        os.replace(part, out / f"call-{i}")
    stage.progress.update(stage="done", since=time.time())
    return 0


def main(argv: list[str]) -> int:
    faulthandler.enable()
    _line_buffer_c_stdio()
    if len(argv) in (3, 4) and argv[0] == "job":  # a 4th: the job's tag for the process list (isolate._tag)
        job = _read_job(argv[1])
        if job is None:
            return 2
        warm_up(job)
        return _run(job, argv[2])
    if len(argv) in (4, 5) and argv[0] == "serve":  # a spare (porter.backends.spares): warm up, wait, run
        warm = _read_job(argv[1])
        if warm is None:
            return 2
        with contextlib.suppress(Exception):  # a backend that cannot load says so in the job's result
            get_backend(warm.backend)
        warm_up(warm)
        with contextlib.suppress(OSError):
            Path(argv[2]).with_name("ready").touch()
        if sys.stdin.readline().strip() != "go":  # porter stopped the spare, or died
            return 0
        job = _read_job(argv[2])
        if job is None:
            return 2
        return _run(job, argv[3])
    if len(argv) == 3 and argv[0] == "calls":  # pycall.run_calls: a module's functions, confined
        return _run_calls(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "probe":
        refused = _enter_sandbox()
        _write_json(Path(argv[2]), {"error": refused} if refused else _probe(argv[1]))
        return 0
    print(
        "usage: python -m porter.backends._child job JOB RESULT_DIR [TAG] | serve WARM JOB RESULT_DIR [TAG]"
        " | probe NAME RESULT | calls CALLS RESULT_DIR",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
