"""`porter port --suite SUITE.toml`: many programs in one run, one summary.

Each program of the suite (:mod:`porter.workflows.suite_file`) is ported by its own ``porter port``
process -- exactly the command a user would type for it, into ``OUT/<name>/`` -- ``jobs`` at a time.  A
process per program keeps what porter already guarantees for one (its sandboxed children, its caches,
its resume ledger, its signal handling) and isolates failures: a program that crashes or hangs is that
program's row, never the suite's end.  The driver only starts, watches and stops them, and writes the
summary from their reports (:class:`porter.suite_report.SuiteReport`):

* a program past its ``timeout`` gets SIGTERM (porter port keeps its report, as on Ctrl-C), then SIGKILL
  to its process group after :data:`TERM_GRACE_S`; it is reported ``timed-out`` and the suite goes on;
* Ctrl-C (or SIGTERM) stops every running program the same way, writes the summary of what finished and
  re-raises, so the command exits 130 (143);
* a program that finished is recorded in ``OUT/.suite/<name>.json`` under a key over its ``porter port``
  arguments, its input trees (names, sizes, modification times), porter's code and the toolchains
  here; a re-run skips it while the key holds and its signed report is complete (``resumed``), and runs
  it again otherwise -- where porter port's own ledger reuses every verdict whose key still holds;
* every GPU timing of every program holds its device's lock file in ``OUT/.suite/locks/``
  (:mod:`porter.backends.device_locks`) from its kernel's load to its last timed launch: timings stay one at
  a time per device across programs; the programs' other GPU work takes no lock, so a time beside it is
  marked contended;
* programs that share the machine start no spare children (:func:`shared_machine_env`): a spare is a
  child warmed up before its job is known, worth it only where cores would idle meanwhile.

summary.json and summary.md are rewritten after each program, so an interruption keeps them.

With ``executor="ray"`` (:mod:`porter.workflows.suite_ray`, a subclass of this module's runner) each
program's ``porter port`` runs as a Ray task on a node of a cluster instead of a child here; everything
else -- the resume records, the summary, the outcomes -- is this module's, so a suite's result does not
depend on where its programs ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from porter import signing
from porter.backends import GpuSlot, gpu_slots, spares
from porter.errors import UsageError
from porter.harness.contention import LOCKS_ENV
from porter.sandbox.environment import ONE_BLAS_THREAD
from porter.suite_report import SuiteProgramResult, SuiteProgress, SuiteReport, contended_timings
from porter.workflows.resume import key_of, load_report, sha, write_atomic
from porter.workflows.suite_file import Suite, SuiteProgram

STATE_DIR = ".suite"  # OUT/.suite: each program's log and resume record, the device locks
# OUT/.suite/durations.json: each program's seconds in earlier runs of the suite here, what the next run starts
# longest first by (an interrupted program's time is a lower bound, kept if longer); only the order depends on it
DURATIONS = "durations.json"
SUMMARY_JSON, SUMMARY_MD, SUMMARY_PNG = "summary.json", "summary.md", "summary.png"
TERM_GRACE_S = 10.0  # SIGTERM, then this long to save its report, then SIGKILL
POLL_S = 0.2
MAX_TREE_FILES = 100_000  # an input tree larger than this is not fingerprinted (never skipped)
_RECORD_SCHEMA = "porter-suite-entry/1"
_TOOLS = ("nvcc", "hipcc", "g++", "nvidia-smi", "rocminfo", "clinfo")
_FULL = object()  # slot_for: every GPU already holds --per-gpu programs


@dataclass(frozen=True)
class SuiteOptions:
    out: Path | None  # None: <suite>.ported/ beside the suite file (or its folder)
    jobs: int
    fresh: bool = False
    port_options: tuple[str, ...] = ()  # given to every program's porter port (--strict, --exclusive)
    command: tuple[str, ...] = (sys.executable, "-m", "porter")
    term_grace_s: float = TERM_GRACE_S
    executor: str = "local"  # "local": a child process per program here; "ray": a Ray task per program
    ray_address: str | None = None  # with "ray": the cluster (else RAY_ADDRESS; "local": a private one)
    shared_dirs: tuple[str, ...] = ()  # with "ray": folders every node sees at the same path
    ray_accelerator: str | None = None  # with "ray": Ray's accelerator_type for programs that need a GPU
    per_gpu: int = 0  # programs pinned to one GPU at once (local) / sharing one (ray); 0: local no cap, ray 1


@dataclass
class SuiteHooks:
    progress: Callable[[SuiteProgress], None] | None = None
    markdown: Callable[[SuiteReport], str] | None = None
    chart: Callable[[SuiteReport, Path], str] | None = None


def default_out(suite: Suite) -> Path:
    """``<stem>.ported/`` beside the suite file; for a folder's suite.toml, ``<folder>.ported/``."""
    path = Path(suite.path)
    from porter.workflows.suite_file import SUITE_NAME

    if path.name == SUITE_NAME:
        return path.parent.parent / f"{path.parent.name}.ported"
    return path.with_name(f"{path.stem}.ported")


def check_out(out: Path, suite: Suite) -> None:
    """UsageError (exit 2) unless `out` can hold the suite's outputs without touching a user's file: a
    folder that is new, empty or an earlier suite output, inside no program's source folder."""
    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not (out / STATE_DIR).is_dir():
        raise UsageError(
            "--out holds files that are not a porter suite output; choose a new or empty folder",
            path=str(out),
        )
    resolved = out.resolve()
    for p in suite.programs:
        for given in p.paths:
            folder = Path(given).resolve()
            folder = folder if folder.is_dir() else folder.parent
            if resolved == folder or resolved.is_relative_to(folder):
                raise UsageError(
                    f"--out {out} is inside program {p.name!r}'s folder {folder}: its port would read the "
                    "suite's outputs as the program's files; choose a folder outside it",
                    path=suite.path,
                    line=p.line or None,
                )


def shared_machine_env(shared: bool) -> dict[str, str]:
    """What a suite adds to the environment of its programs' porter processes, where the user has not set
    the variable: one BLAS thread (``ONE_BLAS_THREAD``: OpenBLAS's idle threads spin, 2 CPU-s per process on
    a 16-core machine); and, for programs that share a machine's cores (`shared`: several at once here, or a
    Ray node's tasks), ``PORTER_SPARES=0``.  One program alone warms children ahead of its jobs so
    they overlap its serial work; programs side by side keep the cores busy already, and there an unused
    spare is pure cost -- measured on an H100 (16 cores), matrixMul ported alone spent 82 of its 179 CPU
    seconds in 32 spares for 18 jobs (bench/cpu_breakdown.py)."""
    wanted = {**ONE_BLAS_THREAD, **({spares.ENV: "0"} if shared else {})}
    return {name: value for name, value in wanted.items() if name not in os.environ}


def run_suite(suite: Suite, options: SuiteOptions, hooks: SuiteHooks | None = None) -> SuiteReport:
    """Port every program of `suite`, ``options.jobs`` at a time, here; the report of what each did.
    (``executor="ray"``: :func:`porter.workflows.suite_ray.run_suite_on_ray`.)"""
    hooks = hooks or SuiteHooks()
    out = (options.out or default_out(suite)).absolute()
    check_out(out, suite)
    (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
    runner = _Runner(suite, options, hooks, out)
    return runner.run()


@dataclass
class _Running:
    program: SuiteProgram
    result: SuiteProgramResult
    proc: subprocess.Popen[bytes] | None  # local: its porter port (None for a Ray task)
    log: IO[bytes]
    started: float
    deadline: float
    key: str | None
    kill_at: float | None = None  # set once SIGTERM was sent: SIGKILL past it
    why: str = ""  # "timed-out" / "interrupted" once the suite stopped it
    task: Any = None  # ray: the task's ObjectRef
    failure: str = ""  # ray: why no port came back (the task failed past its retries)

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None
        return self.proc


class _Runner:
    def __init__(self, suite: Suite, options: SuiteOptions, hooks: SuiteHooks, out: Path) -> None:
        self.suite, self.options, self.hooks, self.out = suite, options, hooks, out
        self.state = out / STATE_DIR
        self.jobs = max(1, options.jobs)
        self.report = SuiteReport(suite.path, str(out), self.jobs)
        self.results = {
            p.name: SuiteProgramResult(p.name, p.paths, str(out / p.name), p.targets) for p in suite.programs
        }
        self.report.programs = list(self.results.values())
        self.running: dict[str, _Running] = {}
        self.durations: list[float] = []  # seconds of each program run to its end by this run
        self.pending: list[SuiteProgram] = []
        self.began = time.monotonic()
        self.shown = 0.0
        # this machine's GPUs, when a program may use one: each GPU program is pinned to the least busy
        self.slots: list[GpuSlot] = gpu_slots() if any(p.may_use_gpu for p in suite.programs) else []
        self.pinned: dict[str, str] = {}  # running program -> the uid of its GPU
        # programs ported again for their contended timings (contended()) -> the seconds of their first port
        self.retiming: dict[str, float] = {}
        # the pass that ports them again: one program per GPU (one at a time where no GPU can be pinned), since
        # another program's timing children load their kernels on the GPU while a lock holder times -- on an
        # H100, after 8 programs had taken 14 timings again side by side, 12 of their 28 GPU times were still contended
        self.quiet = False

    # ------------------------------------------------------------------ the loop

    def run(self) -> SuiteReport:
        self.pending = self.longest_first([p for p in self.suite.programs if not self.resumed(p)])
        self.save()
        try:
            self.drain(self.pending)
            again = self.contended()  # ported again for their contended GPU times, the GPU now quiet
            if again:
                self.retiming = {p.name: self.results[p.name].seconds or 0.0 for p in again}
                self.pending = list(again)
                self.quiet = True
                self.drain(self.pending)
        except KeyboardInterrupt:
            self.report.interrupted = True
            self.stop_all()
            self.finish_report()
            raise
        self.finish_report()
        return self.report

    def contended(self) -> list[SuiteProgram]:
        """The programs this run ported (done) whose reports hold GPU times taken while the GPU was not
        porter's alone: ported again once every program has ended, so that their timings -- and only those:
        porter port's ledger reuses every build, run and verdict -- have the GPU to themselves (timings stay
        one at a time per GPU through the device locks)."""
        return [
            p
            for p in self.suite.programs
            if self.results[p.name].status == "done" and contended_timings(self.results[p.name].report)
        ]

    def drain(self, pending: list[SuiteProgram]) -> None:
        """Start the programs of `pending`, ``jobs`` at a time (in the quiet pass one per GPU), until every one
        has ended."""
        limit = min(self.jobs, len(self.slots) or 1) if self.quiet else self.jobs
        while pending or self.running:
            while pending and len(self.running) < limit:
                startable = next((p for p in pending if self.slot_for(p) is not _FULL), None)
                if startable is None:  # every GPU holds --per-gpu programs: wait for one to end
                    break
                pending.remove(startable)
                self.start(startable)
            self.poll()
            self.show()
            if self.running:
                time.sleep(POLL_S)

    def start(self, program: SuiteProgram) -> None:
        result = self.results[program.name]
        argv = [*self.options.command, "port", *self.port_args(program)]
        key = self.key(program)
        log_path = self.state / f"{program.name}.log"
        log = log_path.open("ab" if program.name in self.retiming else "wb")  # a second port: after the first
        if program.name in self.retiming:
            self.keep_first(program.name)
        result.log = str(log_path)
        env = {**os.environ, **shared_machine_env(self.jobs > 1), LOCKS_ENV: str(self.state / "locks")}
        slot = self.slot_for(program)
        if isinstance(slot, GpuSlot):
            env.update(dict(slot.env))
            self.pinned[program.name] = slot.uid
            result.gpu = f"{slot.name} ({slot.uid})"
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # its own process group: Ctrl-C at the terminal reaches the driver only
            )  # fmt: skip
        except OSError as err:
            log.close()
            self.pinned.pop(program.name, None)
            result.status, result.reason = "error", f"could not start porter port: {err}"
            self.ended(result)
            return
        now = time.monotonic()
        result.status = "running"
        self.running[program.name] = _Running(program, result, proc, log, now, now + program.timeout, key)
        self.save()  # the summary says what runs

    def slot_for(self, program: SuiteProgram) -> GpuSlot | None | object:
        """The GPU to pin `program` to: the one with the fewest programs pinned now (None: it uses no GPU,
        or this machine has none to pin to; :data:`_FULL`: each holds ``per_gpu`` programs already)."""
        if not self.slots or not program.may_use_gpu:
            return None
        load = {s.uid: 0 for s in self.slots}
        for uid in self.pinned.values():
            load[uid] = load.get(uid, 0) + 1
        slot = min(self.slots, key=lambda s: load[s.uid])  # the first of the least busy
        cap = 1 if self.quiet else self.options.per_gpu
        return _FULL if cap and load[slot.uid] >= cap else slot

    def port_args(self, program: SuiteProgram) -> list[str]:
        args = [*program.port_args(), "--out", str(self.out / program.name), *self.options.port_options]
        # a port again for its timings resumes from the ledger its first port of this run left
        return [*args, "--fresh"] if self.options.fresh and program.name not in self.retiming else args

    def poll(self) -> None:
        now = time.monotonic()
        for name, r in list(self.running.items()):
            code = r.popen.poll()
            if code is None:
                if r.kill_at is None and now >= r.deadline:
                    r.why = "timed-out"
                    self.signal(r, signal.SIGTERM)
                    r.kill_at = now + self.options.term_grace_s
                elif r.kill_at is not None and now >= r.kill_at:
                    self.signal(r, signal.SIGKILL)
                continue
            del self.running[name]
            self.exited(r, code, now)

    def stop_all(self) -> None:
        """Ctrl-C: SIGTERM to every running program, SIGKILL to what is left after the grace (at once on
        a second Ctrl-C); each is reported interrupted with what its report kept."""
        for r in self.running.values():
            r.why = "interrupted"
            self.signal(r, signal.SIGTERM)
        deadline = time.monotonic() + self.options.term_grace_s
        try:
            while any(r.popen.poll() is None for r in self.running.values()) and time.monotonic() < deadline:
                time.sleep(0.05)
        except KeyboardInterrupt:
            pass
        for name, r in list(self.running.items()):
            if r.popen.poll() is None:
                self.signal(r, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    r.popen.wait(timeout=5)
            del self.running[name]
            self.exited(r, r.popen.returncode, time.monotonic())

    @staticmethod
    def signal(r: _Running, sig: signal.Signals) -> None:
        with contextlib.suppress(OSError):
            os.killpg(r.popen.pid, sig)  # start_new_session: its pid is its group's id

    # ------------------------------------------------------------------ outcomes

    def exited(self, r: _Running, code: int | None, now: float, seconds: float | None = None) -> None:
        """`r`'s port ended with `code` (None: killed, or no process came back); `seconds`: how long it ran
        where it ran (default: since it was started here)."""
        with contextlib.suppress(OSError):
            r.log.close()
        self.pinned.pop(r.program.name, None)
        result = r.result
        result.exit_code, result.seconds = code, now - r.started if seconds is None else seconds
        first = result.report
        before = contended_timings(first)
        result.report = self.read_report(result)
        if r.program.name in self.retiming:  # its second port: both count
            result.seconds += self.retiming[r.program.name]
            result.timed_again = max(0, before - contended_timings(result.report))
        complete = bool(result.report and result.report.get("complete"))
        if r.why == "timed-out":
            result.status = "timed-out"
            result.reason = f"killed at its timeout of {r.program.timeout:g} s"
        elif r.failure:
            result.status, result.reason = "error", r.failure
        elif r.why == "interrupted" or code in (130, 128 + signal.SIGTERM, -signal.SIGTERM, -signal.SIGINT):
            result.status, result.reason = "interrupted", "stopped by Ctrl-C (or SIGTERM)"
        elif code in (0, 1) and complete:
            result.status = "done"
            self.record(r)
        else:
            result.status = "error"
            result.reason = _last_error(Path(result.log)) or (
                f"porter port exited {code}" + ("" if complete else " and left no complete report")
            )
        if r.program.name in self.retiming and result.status != "done" and first is not None:
            self.restore_first(r.program.name, result, first)
        if result.status != "interrupted":
            self.durations.append(result.seconds)
        self.keep_duration(r.program.name, result.seconds, lower_bound=result.status == "interrupted")
        self.ended(result)

    def keep_first(self, name: str) -> None:
        """Before a program is ported again for its timings: a copy of its first port's report files
        (OUT/.suite/<name>.first), which its second port rewrites from its start."""
        kept = self.state / f"{name}.first"
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for path in (self.out / name).glob("report*"):
            if path.is_file():
                shutil.copy2(path, kept / path.name)

    def restore_first(self, name: str, result: SuiteProgramResult, first: Mapping[str, Any]) -> None:
        """A port again for its timings that did not finish (stopped, timed out, failed) leaves the program as
        its first port left it: that port's report files back in place, its verdicts the program's row, the
        timings not taken again named in the row's reason -- never a report cut short where a complete one
        was."""
        why = result.reason or result.status
        for path in (self.state / f"{name}.first").iterdir():
            shutil.copy2(path, self.out / name / path.name)
        result.report, result.timed_again = first, 0
        result.status = "done"
        result.reason = (
            f"its contended GPU timings were not taken again ({why}): its first port's report is kept"
        )

    # ------------------------------------------------------------------ order

    def known_durations(self) -> dict[str, float]:
        """Each program's seconds in earlier runs here (DURATIONS); {} when none ran or the file is unreadable."""
        try:
            doc = json.loads((self.state / DURATIONS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {k: float(v) for k, v in doc.items() if isinstance(v, int | float) and not isinstance(v, bool)}

    def keep_duration(self, name: str, seconds: float | None, lower_bound: bool) -> None:
        if seconds is None:
            return
        known = self.known_durations()
        if lower_bound and known.get(name, 0.0) >= seconds:
            return
        known[name] = round(seconds, 3)
        write_atomic(self.state / DURATIONS, json.dumps(known, indent=1, sort_keys=True) + "\n")

    def longest_first(self, programs: list[SuiteProgram]) -> list[SuiteProgram]:
        """The programs in the order they start: longest first by their seconds in earlier runs of the suite
        here (one not timed yet counts as the median of those that were), the suite's order among equals and on
        a first run.  The longest programs then start first, not last, and do not finish alone at the end."""
        known = self.known_durations()
        if not known:
            return programs
        typical = statistics.median(known.values())
        return sorted(programs, key=lambda p: -known.get(p.name, typical))

    def ended(self, result: SuiteProgramResult) -> None:
        self.save()
        self.show(force=True)

    def read_report(self, result: SuiteProgramResult) -> dict[str, Any] | None:
        folder = Path(result.out)
        if not (folder / "report.json").is_file():
            return None
        for kind in ("program", "port"):
            doc = load_report(folder, kind)
            if doc is not None:
                return doc
        return None

    # ------------------------------------------------------------------ resume

    def key(self, program: SuiteProgram) -> str | None:
        """What a program's finished port depends on (None: its inputs are too large to fingerprint)."""
        trees = _trees_state(program)
        if trees is None:
            return None
        env = {k: v for k, v in os.environ.items() if k.startswith("PORTER_")}
        tools = {t: shutil.which(t) or "" for t in _TOOLS}
        argv = [a for a in self.port_args(program) if a != "--fresh"]
        return key_of("suite-program", argv, trees, env, tools)

    def record(self, r: _Running) -> None:
        if r.key is None:
            return
        doc = {
            "schema": _RECORD_SCHEMA,
            "key": r.key,
            "exit_code": r.result.exit_code,
            "seconds": r.result.seconds,
        }
        write_atomic(self.state / f"{r.program.name}.json", signing.sign_json_text(json.dumps(doc, indent=1)))

    def resumed(self, program: SuiteProgram) -> bool:
        """Whether an earlier run finished `program` for the same inputs (then its result is that run's)."""
        if self.options.fresh:
            return False
        try:
            doc = json.loads((self.state / f"{program.name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return False
        if not isinstance(doc, dict) or doc.get("schema") != _RECORD_SCHEMA or signing.json_problem(doc):
            return False
        if doc.get("key") != self.key(program):
            return False
        result = self.results[program.name]
        report = self.read_report(result)
        if not report or not report.get("complete"):
            return False
        result.status, result.report = "resumed", report
        result.exit_code, result.seconds = doc.get("exit_code"), doc.get("seconds")
        log = self.state / f"{program.name}.log"
        result.log = str(log) if log.is_file() else ""
        return True

    # ------------------------------------------------------------------ views

    def progress(self) -> SuiteProgress:
        now, pending = time.monotonic(), self.pending
        done = [p for p in self.report.programs if p.status not in ("not-started", "running")]
        running = {name: now - r.started for name, r in self.running.items()}
        eta = None
        if self.durations:
            mean = sum(self.durations) / len(self.durations)
            work = len(pending) * mean + sum(max(0.0, mean - s) for s in running.values())
            eta = work / self.jobs
        return SuiteProgress(len(self.report.programs), self.jobs, done, running, len(pending), eta)

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.hooks.progress is None or (not force and now - self.shown < 0.5):
            return
        self.shown = now
        self.hooks.progress(self.progress())

    def save(self) -> None:
        """summary.json and summary.md as they stand (atomically)."""
        self.report.seconds = time.monotonic() - self.began
        write_atomic(self.out / SUMMARY_JSON, json.dumps(self.report.document(), indent=2) + "\n")
        if self.hooks.markdown is not None:
            write_atomic(self.out / SUMMARY_MD, self.hooks.markdown(self.report))

    def finish_report(self) -> None:
        for p in self.report.programs:
            if p.status == "running":  # (never: every running one was stopped and ended)
                p.status = "interrupted"
        if self.hooks.chart is not None:
            self.report.chart = self.hooks.chart(self.report, self.out / SUMMARY_PNG)
        self.save()


def _trees_state(program: SuiteProgram) -> str | None:
    """A hash of every file's name, size and modification time under the program's inputs (its paths'
    folders, include and data folders); None past :data:`MAX_TREE_FILES` files."""
    roots = []
    for given in program.paths:
        p = Path(given)
        roots.append(p if p.is_dir() else p.parent)
    roots += [Path(d) for d in (*program.include, *program.data)]
    seen: list[tuple[str, int, int]] = []
    for root in dict.fromkeys(roots):
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                seen.append((path, st.st_size, st.st_mtime_ns))
                if len(seen) > MAX_TREE_FILES:
                    return None
    return sha(seen)


def _last_error(log: Path) -> str:
    """porter's own one-line error in a program's log (``porter: path:3: ...``), the last one."""
    try:
        with log.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            tail = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(tail):
        if line.startswith("porter: ") and not line.startswith(("porter: warning", "porter: note")):
            return line[len("porter: ") :].strip()
    return ""


def summary_paths(report: SuiteReport) -> Mapping[str, str]:
    """Where the summary's files are."""
    out = Path(report.out_dir)
    return {"json": str(out / SUMMARY_JSON), "markdown": str(out / SUMMARY_MD), "chart": report.chart}
