"""`porter port --suite --executor ray`: each program of a suite ported by a Ray task on a cluster's node.

The unit of work is the one :mod:`porter.workflows.suite` runs locally -- a program's whole ``porter port``,
the command a user would type -- sent as one Ray task (:func:`port_on_node`) that runs that command in a
scratch folder of its node, its sandboxed children inside it as everywhere else.  What travels:

* **inputs by value**: each folder a program reads (its paths' folders, ``include`` and ``data``), packed
  once per run as a tarball in Ray's object store and unpacked on the node at its own absolute path under
  the scratch folder (so ``../common`` between them still resolves), the port's arguments rewritten to
  match; a folder under a ``--shared-dir`` (mounted at the same path on every node) is read in place;
* **outputs by value**: the task returns ``OUT/<name>/`` as a tarball, its log and its exit status; the
  driver alone writes ``OUT/`` -- the program's folder, its log, the resume record and the summary.

A program asks for a GPU (``num_gpus=1``, and ``accelerator_type`` when ``--ray-accelerator`` names one)
only when its ``toolchains`` name a GPU toolchain (:data:`porter.workflows.suite_file.GPU_TOOLCHAINS`; ``--per-gpu N``: a
``1/N`` share of one, so N programs run on a GPU at once), and then only for its port's *gpu stage*: its
translations, compile checks and CPU toolchains' builds are a *cpu stage* before it, a one-CPU task whose
output folder the gpu stage resumes from (:func:`plan_stages`); every other program is one
one-CPU task.  Tasks are spread over the nodes (``SPREAD``); timings on a node take that node's device
locks (its temp folder), so two programs never time on one device at once, as locally.  A task lost with
its node (the raylet or the worker killed) is run again on another by Ray (:data:`MAX_RETRIES`); a port
past its ``timeout`` is stopped by the task exactly as the local executor stops it.  Ctrl-C cancels the
running tasks (each stops its port as on a timeout) and keeps every program that finished.

Signed files that come back (``report.json``, ``.porter-seal``) are checked on the node against its
state key and signed again here with the driver's (:mod:`porter.signing`): the keys are per user and
machine, and what a node proved is what the driver then trusts and resumes from; a file that failed the
check on its node stays as it came (not trusted here either).

``ray`` is imported only here, and only when the executor is asked for (``pip install 'porter-gpu[ray]'``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from porter.errors import UsageError
from porter.harness.contention import LOCKS_ENV
from porter.suite_report import SuiteReport
from porter.workflows.suite import (
    POLL_S,
    STATE_DIR,
    SuiteHooks,
    SuiteOptions,
    _Runner,
    _Running,
    check_out,
    default_out,
    shared_machine_env,
)
from porter.workflows.suite_file import GPU_TOOLCHAINS, Suite, SuiteProgram

# the stages of a program's port on Ray (plan_stages): names of stages, not of targets; a program that
# needs no GPU is one task, its whole port
PORT_STAGE, CPU_STAGE, GPU_STAGE = "port", "cpu", "gpu"
MAX_RETRIES = 3  # Ray runs a task lost with its node (or worker) again, this many times at most
CANCEL_WAIT_S = 5.0  # past a cancelled task's own grace for its port: then it is killed with its worker
SIGNED_NAMES = ("report.json", ".porter-seal")  # files porter signs with the state key
_RAY_MISSING = (
    "--executor ray needs Ray: pip install 'porter-gpu[ray]' (on the driver and on every node of the cluster)"
)


# --------------------------------------------------------------------------- the driver


def run_suite_on_ray(suite: Suite, options: SuiteOptions, hooks: SuiteHooks | None = None) -> SuiteReport:
    """:func:`porter.workflows.suite.run_suite` with each program a Ray task on the cluster at
    ``options.ray_address``: the same checks first, the cluster joined before OUT is touched (a cluster
    not found is exit 2 with nothing written)."""
    hooks = hooks or SuiteHooks()
    out = (options.out or default_out(suite)).absolute()
    check_out(out, suite)
    with connect(options.ray_address) as ray:
        (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
        return RayRunner(suite, options, hooks, out, ray).run()


@contextlib.contextmanager
def connect(address: str | None) -> Iterator[Any]:
    """Ray, connected to the cluster at `address` (else ``RAY_ADDRESS``; ``local``: a Ray of this machine
    for this run alone); disconnected after.  UsageError (exit 2) without Ray, without an address, or
    when the cluster cannot be reached."""
    try:
        import ray
    except ImportError:
        raise UsageError(_RAY_MISSING) from None
    import logging

    address = address or os.environ.get("RAY_ADDRESS") or None
    if not address:
        raise UsageError(
            "--executor ray needs the cluster's address: --ray-address HOST:PORT (or RAY_ADDRESS); "
            "'--ray-address local' starts Ray on this machine for this run"
        )
    _reach(address)
    with _cluster_news_to_stderr():
        previous = signal.getsignal(signal.SIGTERM)  # ray.init sets its own (sys.exit): porter's stays
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise UsageError(f"--ray-address {address}: cannot join the Ray cluster: {err}") from None
        finally:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, previous)
        try:
            yield ray
        finally:
            ray.shutdown()


@contextlib.contextmanager
def _cluster_news_to_stderr() -> Iterator[None]:
    """Ray's driver prints the cluster's messages (a node died, a task is retried) on stdout from a
    thread of its own, where ``--json`` writes the summary: they go to stderr instead.  (Through Ray's
    private module: where it is not as expected, they stay where Ray prints them.)"""
    try:
        from ray._private import worker
    except ImportError:
        yield
        return
    original = getattr(worker, "print_to_stdstream", None)
    if not callable(original):
        yield
        return

    def to_stderr(data: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(data, dict):
            data = {**data, "is_err": True}
        return original(data, *args, **kwargs)

    worker.print_to_stdstream = to_stderr
    try:
        yield
    finally:
        worker.print_to_stdstream = original


def _reach(address: str) -> None:
    """For a ``HOST:PORT`` address: UsageError unless its head answers within seconds (ray.init would
    wait on it for many minutes).  ``local``, ``auto`` and ``ray://`` addresses are Ray's own."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as err:
        raise UsageError(f"--ray-address {address}: no Ray head answers there ({err})") from None


# a stage's name and the toolchains its port gets (None: the program's)
Stage = tuple[str, tuple[str, ...] | None]


def plan_stages(program: SuiteProgram) -> list[Stage]:
    """The Ray tasks that port `program`, in order.  A program that needs no GPU is one task (``port``).
    One that does is a ``cpu`` stage -- its port with the toolchains that need no GPU and without its
    runs: the translations, compile checks and CPU builds, on a CPU task -- then a ``gpu`` stage, the
    program's whole port on a GPU task, started from the cpu stage's output folder so that porter's own
    resume reuses every verdict the cpu stage reached.  (The runs stay in the gpu stage: where the
    original runs on a GPU its capture is the one every kernel replay uses, the CPU devices' included,
    so replays made in the cpu stage would be made again.)  Without a toolchain that needs no GPU there
    is no cpu stage."""
    if not program.needs_gpu:
        return [(PORT_STAGE, None)]
    cpu = tuple(t for t in program.toolchains or () if t not in GPU_TOOLCHAINS)
    return [*([(CPU_STAGE, cpu)] if cpu else []), (GPU_STAGE, None)]


@dataclass
class _Staged(_Running):
    """A running program on Ray: the stage its task runs and those left."""

    stage: str = PORT_STAGE
    left: list[Stage] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)  # the port's task spec (its own arguments)
    trees: list[Any] = field(default_factory=list)  # the inputs' refs, for every stage
    earlier: Any = None  # the cpu stage's result (its ref), which the gpu stage starts from
    spent: float = 0.0  # seconds the stages that ended ran on their nodes


class RayRunner(_Runner):
    """The suite's loop (:class:`porter.workflows.suite._Runner`) with each program a Ray task: started
    by :meth:`start`, collected by :meth:`poll`, cancelled by :meth:`stop_all`; the outcomes, the resume
    records and the summary are the local runner's."""

    def __init__(self, suite: Suite, options: SuiteOptions, hooks: SuiteHooks, out: Path, ray: Any) -> None:
        super().__init__(suite, options, hooks, out)
        self.ray = ray
        if options.jobs <= 0:  # not given: as many at once as the cluster has CPUs (Ray queues the rest)
            self.jobs = max(1, int(ray.cluster_resources().get("CPU", 1)))
            self.report.jobs = self.jobs
        self.shared = [os.path.abspath(d) for d in options.shared_dirs]
        self.trees: dict[str, Any] = {}  # folder -> its tarball in the object store (packed once)
        self.remote = ray.remote(port_on_node)
        self.remote_after = ray.remote(port_after_on_node)
        mine = {k: v for k, v in os.environ.items() if k.startswith("PORTER_") and k != LOCKS_ENV}
        self.porter_env = {**shared_machine_env(True), **mine}  # a node runs several programs' tasks at once
        from porter.workflows.resume import code_fingerprint

        self.fingerprint = code_fingerprint()

    def start(self, program: SuiteProgram) -> None:
        result = self.results[program.name]
        log_path = self.state / f"{program.name}.log"
        result.log = str(log_path)
        key = self.key(program)
        log = log_path.open("wb")
        try:
            roots = _roots(program)
            packed = [r for r in roots if not self.is_shared(r)]
            refs = [self.tree(r) for r in packed]
        except OSError as err:
            log.close()
            result.status, result.reason = "error", f"could not pack its inputs for Ray: {err}"
            self.ended(result)
            return
        spec = {
            "name": program.name,
            "args": self.node_args(program),
            "packed": packed,
            "shared": [r for r in roots if r not in packed],
            "timeout": program.timeout,
            "term_grace": self.options.term_grace_s,
            "env": self.porter_env,
            "fingerprint": self.fingerprint,
        }
        now = time.monotonic()
        r = _Staged(program, result, None, log, now, now + program.timeout, key)
        r.left, r.spec, r.trees = plan_stages(program), spec, refs
        result.ran_on = []
        self.launch(r)
        result.status = "running"
        self.running[program.name] = r
        self.save()

    def contended(self) -> list[SuiteProgram]:
        """None: a task starts from its inputs on whichever node takes it, so a second port there would redo
        every stage, not only the contended timings (the report names them as contended)."""
        return []

    def node_args(self, program: SuiteProgram) -> list[str]:
        """Its ``porter port`` arguments for a node (which writes into its scratch folder, not OUT)."""
        args = list(self.port_args(program))
        at = args.index("--out")
        del args[at : at + 2]
        return args

    def launch(self, r: _Staged) -> None:
        """The task of `r`'s next stage sent to the cluster."""
        r.stage, chains = r.left.pop(0)
        spec = {**r.spec, "stage": r.stage}
        if r.stage == CPU_STAGE:  # the toolchains that need no GPU, no runs: what a gpu stage reuses
            spec["args"] = self.node_args(replace(r.program, toolchains=chains, runs=()))
        options = task_options(r.program, self.options.ray_accelerator, self.options.per_gpu, r.stage)
        if r.earlier is None:
            r.task = self.remote.options(**options).remote(spec, *r.trees)
            return
        # from the cpu stage's folder: --fresh (which only the suite's own records need) would drop it;
        # the timeout is the program's, over both stages
        spec["args"] = [a for a in spec["args"] if a != "--fresh"]
        spec["timeout"] = max(1.0, r.program.timeout - r.spent)
        r.task = self.remote_after.options(**options).remote(spec, r.earlier, *r.trees)

    def is_shared(self, folder: str) -> bool:
        return any(folder == d or folder.startswith(d.rstrip("/") + "/") for d in self.shared)

    def tree(self, folder: str) -> Any:
        if folder not in self.trees:
            self.trees[folder] = self.ray.put(_pack(Path(folder), folder.lstrip("/")))
        return self.trees[folder]

    def poll(self) -> None:
        tasks = {r.task: name for name, r in self.running.items()}
        if not tasks:
            return
        ready, _ = self.ray.wait(list(tasks), num_returns=len(tasks), timeout=0)
        for task in ready:
            r = self.running[tasks[task]]
            doc = self.outcome(r)
            if isinstance(r, _Staged) and r.left and self.next_stage(r, doc):
                continue  # its next stage runs
            del self.running[tasks[task]]
            self.finish(r, doc)

    def outcome(self, r: _Running) -> dict[str, Any] | None:
        """What `r`'s task sent back (None when it was cancelled or failed: then why, on `r`), its log and
        node written down."""
        ray = self.ray
        stage = r.stage if isinstance(r, _Staged) else PORT_STAGE
        try:
            doc: dict[str, Any] = ray.get(r.task)
        except (ray.exceptions.TaskCancelledError, KeyboardInterrupt):
            r.why = r.why or "interrupted"
            return None
        except ray.exceptions.RayError as err:
            if r.why != "interrupted":
                which = "" if stage == PORT_STAGE else f" ({stage} stage)"
                r.failure = f"its Ray task{which} failed: {_first_line(err)}"
            return None
        node = str(doc.get("node", "?"))
        which = "" if stage == PORT_STAGE else f"stage {stage} "
        r.log.write(f"porter: {which}ran on Ray node {node}\n".encode())
        r.log.write(doc.get("log", b""))
        r.result.ran_on.append({"stage": stage, "node": node})
        if doc.get("error"):
            r.failure = str(doc["error"])
        return doc

    def next_stage(self, r: _Staged, doc: Mapping[str, Any] | None) -> bool:
        """`r`'s cpu stage ended with `doc`: its gpu stage started from what it made (True), unless the
        program ends here (False: the task failed or was cancelled, or the port ran out of the program's
        time)."""
        if doc is None or doc.get("error") or doc.get("why") == "timed-out":
            return False
        r.spent += float(doc.get("seconds") or 0.0)
        r.earlier = r.task
        self.launch(r)
        return True

    def collect(self, r: _Running) -> None:
        """A task that ended: its output folder and log written here, its outcome the local runner's."""
        self.finish(r, self.outcome(r))

    def finish(self, r: _Running, doc: Mapping[str, Any] | None) -> None:
        """`r`'s last task ended with `doc` (:meth:`outcome`): the program's outcome."""
        seconds = None
        code = None
        if doc is not None and not doc.get("error"):
            try:
                self.unpack(r.program.name, doc["out"], doc.get("verified", []))
            except (OSError, tarfile.TarError) as err:
                r.failure = f"its output from Ray could not be written: {err}"
            code, seconds = doc.get("exit_code"), doc.get("seconds")
            if seconds is not None and isinstance(r, _Staged):
                seconds += r.spent
            if doc.get("why") == "timed-out":
                r.why = "timed-out"
        self.exited(r, code, time.monotonic(), seconds)

    def unpack(self, name: str, blob: bytes, verified: Sequence[str]) -> None:
        """OUT/<name>/ replaced by the folder the node sent (through a folder beside it: a reader never
        sees half of it), the signed files its node checked signed again with this machine's key."""
        if not blob:
            return
        incoming = self.state / f".incoming-{name}"
        shutil.rmtree(incoming, ignore_errors=True)
        incoming.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
            tar.extractall(incoming, filter=_within)
        _resign(incoming / name, verified)
        target = self.out / name
        old = self.state / f".replaced-{name}"
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            target.rename(old)
        (incoming / name).rename(target)
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(incoming, ignore_errors=True)

    def stop_all(self) -> None:
        """Ctrl-C: every running task cancelled (its port stopped as on a timeout, inside the task); a task
        that finished meanwhile is kept; one still there past the grace is killed with its worker."""
        ray = self.ray
        for r in self.running.values():
            r.why = "interrupted"
            with contextlib.suppress(Exception):
                ray.cancel(r.task)
        tasks = {r.task: name for name, r in self.running.items()}
        deadline = time.monotonic() + self.options.term_grace_s + CANCEL_WAIT_S
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
            while tasks and time.monotonic() < deadline:
                ready, _ = ray.wait(list(tasks), num_returns=len(tasks), timeout=POLL_S)
                for task in ready:
                    self.collect_stopped(self.running.pop(tasks.pop(task)))
        for name, r in list(self.running.items()):
            with contextlib.suppress(Exception):
                ray.cancel(r.task, force=True)
            del self.running[name]
            self.exited(r, None, time.monotonic())

    def collect_stopped(self, r: _Running) -> None:
        """A task that ended after Ctrl-C: finished (kept, as done) or cancelled (interrupted)."""
        try:
            self.ray.get(r.task, timeout=0)
        except Exception:  # noqa: BLE001 - cancelled, or failed: interrupted either way
            self.exited(r, None, time.monotonic())
            return
        if isinstance(r, _Staged) and r.left:  # a cpu stage that finished: its gpu stage is not begun
            self.exited(r, None, time.monotonic())
            return
        r.why = ""
        self.collect(r)


def task_options(
    program: SuiteProgram, accelerator: str | None = None, per_gpu: int = 0, stage: str = PORT_STAGE
) -> dict[str, Any]:
    """The Ray task options of a program's `stage` (:func:`plan_stages`): one CPU; one GPU (of type
    `accelerator`, Ray's ``accelerator_type``, when given; a ``1/per_gpu`` share of one when several
    programs may share a GPU) only when its toolchains name a GPU toolchain and the stage is not its cpu
    stage; run again on node loss (never on porter's own failure, which is a verdict); spread over the
    nodes."""
    gpu = program.needs_gpu and stage != CPU_STAGE
    found: dict[str, Any] = {
        "num_cpus": 1,
        "num_gpus": (1 / per_gpu if per_gpu > 1 else 1) if gpu else 0,
        "max_retries": MAX_RETRIES,
        "retry_exceptions": False,
        "scheduling_strategy": "SPREAD",
        "name": f"porter port {program.name}" + ("" if stage == PORT_STAGE else f" ({stage} stage)"),
    }
    if gpu and accelerator:
        found["accelerator_type"] = accelerator
    return found


def _roots(program: SuiteProgram) -> list[str]:
    """The folders a program's port reads (its paths' folders, include, data), absolute, none inside
    another (the outer one carries it)."""
    found = []
    for given in program.paths:
        p = Path(given)
        found.append(os.path.abspath(p if p.is_dir() else p.parent))
    found += [os.path.abspath(d) for d in (*program.include, *program.data)]
    kept: list[str] = []
    for folder in sorted(set(found), key=len):
        if not any(folder == k or folder.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(folder)
    return kept


def _pack(folder: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(str(folder), arcname=arcname)
    return buf.getvalue()


def _within(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``data`` filter for what a node sends back, a link out of its folder (or an absolute
    one) left out instead of failing the whole folder."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def _resign(folder: Path, verified: Sequence[str]) -> None:
    """Sign again, with this machine's state key, each file (relative to `folder`) its node checked."""
    import json

    from porter import signing

    for rel in verified:
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            continue
        path = folder / rel
        try:
            text = path.read_text(encoding="utf-8")
            doc = json.loads(text)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and signing.json_problem(doc) is not None:  # another key's (not ours)
            path.write_text(signing.sign_json_text(text), encoding="utf-8")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


# --------------------------------------------------------------------------- the task, on a node


def port_on_node(spec: Mapping[str, Any], *trees: bytes) -> dict[str, Any]:
    """Run one program's ``porter port`` on this node: its input folders (`trees`, tarballs of
    ``spec["packed"]`` in that order) unpacked under a scratch folder, the port written there and sent
    back as a tarball with its log and exit status.  Cancelled (Ctrl-C on the driver), it stops the port
    as a timeout does -- SIGTERM, SIGKILL after the grace -- before it ends."""
    return _port_on_node(spec, None, trees)


def port_after_on_node(spec: Mapping[str, Any], earlier: Mapping[str, Any], *trees: bytes) -> dict[str, Any]:
    """:func:`port_on_node` started from what an earlier stage's task sent back (`earlier`): its output
    folder unpacked as the port's own, at the earlier stage's scratch path where this node can make it
    (the verdicts' keys name the paths they were reached at), and its signed files that the earlier
    node checked signed again with this node's key -- so the port resumes from every verdict it holds."""
    return _port_on_node(spec, earlier, trees)


def _port_on_node(
    spec: Mapping[str, Any], earlier: Mapping[str, Any] | None, trees: Sequence[bytes]
) -> dict[str, Any]:
    from porter.workflows.resume import code_fingerprint

    node = socket.gethostname()
    try:
        import ray

        node = f"{node} ({ray.get_runtime_context().get_node_id()[:12]})"
    except Exception:  # noqa: BLE001, S110 - the name is only for the log
        pass
    mine = code_fingerprint()
    if mine != spec["fingerprint"]:
        return {
            "node": node,
            "error": f"Ray node {node} runs another porter (code {mine}, the driver's {spec['fingerprint']}): "
            "install the same porter on every node",
        }
    for folder in spec["shared"]:
        if not os.path.isdir(folder):
            return {"node": node, "error": f"--shared-dir: {folder} is not on Ray node {node}"}
    with _interruptible():
        return _port_here(spec, trees, node, earlier)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ray cancels a running task by interrupting its thread as SIGINT would -- which does nothing where
    SIGINT is ignored, as in workers of a raylet started in the background (``nohup ray start``, a
    service): Python's own handler for the task's span, the worker's after."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _port_here(
    spec: Mapping[str, Any], trees: Sequence[bytes], node: str, earlier: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    name = spec["name"]
    at = str(earlier.get("scratch", "")) if earlier else ""
    scratch = _scratch(name, at)
    try:
        inside = scratch / "in"
        for blob in trees:
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
                tar.extractall(inside, filter="tar")  # the user's own folders, links as they are
        moved = {folder: str(inside) + folder for folder in spec["packed"]}
        out = scratch / "out" / name
        note = b""
        if earlier is not None and earlier.get("out"):
            with tarfile.open(fileobj=io.BytesIO(earlier["out"]), mode="r:*") as tar:
                tar.extractall(out.parent, filter=_within)
            _resign(out, earlier.get("verified", []))
            if str(scratch) != at:
                note = (
                    f"porter: note: the earlier stage's folder {at} cannot be made on this node: "
                    "its verdicts, whose keys name their paths, are reached again\n"
                ).encode()
        argv = [sys.executable, "-m", "porter", "port", *(_moved(a, moved) for a in spec["args"])]
        argv += ["--out", str(out)]
        env = {**os.environ, **spec["env"], LOCKS_ENV: _node_locks()}
        log = scratch / "port.log"
        code, why, seconds = _run(argv, env, scratch, log, float(spec["timeout"]), float(spec["term_grace"]))
        return {
            "node": node,
            "exit_code": code,
            "why": why,
            "seconds": seconds,
            "log": note + (log.read_bytes() if log.is_file() else b""),
            "out": _pack(out, name) if out.is_dir() else b"",
            "verified": _verified(out),
            "scratch": str(scratch),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _scratch(name: str, at: str = "") -> Path:
    """A new scratch folder for `name`'s port: `at` (an earlier stage's, on another node) where its
    parent is here and it is not, so the paths the earlier verdicts were reached at hold again; else one
    of this node's temp folder."""
    if at:
        wanted = Path(at)
        if (
            wanted.is_absolute()
            and wanted.name.startswith(f"porter-suite-{name}-")
            and wanted.parent.is_dir()
        ):
            with contextlib.suppress(OSError):
                wanted.mkdir(mode=0o700)
                return wanted
    return Path(tempfile.mkdtemp(prefix=f"porter-suite-{name}-"))


def _moved(arg: str, moved: Mapping[str, str]) -> str:
    """`arg` with each packed folder's path (whole path components, not inside a longer path) replaced by
    where it was unpacked, in one pass."""
    if not moved:
        return arg
    names = "|".join(re.escape(f) for f in sorted(moved, key=len, reverse=True))
    pattern = rf"(?<![A-Za-z0-9._+/-])(?:{names})(?![A-Za-z0-9._+-])"
    return re.sub(pattern, lambda m: moved[m.group(0)], arg)


def _node_locks() -> str:
    """This node's device-lock folder, shared by every task here (timings one at a time per device)."""
    folder = Path(tempfile.gettempdir()) / f"porter-device-locks-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return str(folder)


def _run(
    argv: list[str], env: Mapping[str, str], cwd: Path, log: Path, timeout: float, grace: float
) -> tuple[int | None, str, float]:
    """Run the port to its end, or to `timeout` (then SIGTERM, SIGKILL `grace` later: why ``timed-out``);
    its exit status, why it was stopped and its seconds.  Any exception here (a cancel's
    KeyboardInterrupt) stops it the same way first."""
    started = time.monotonic()
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=dict(env), cwd=cwd,
            start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
    why, kill_at = "", None
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if kill_at is None and now >= started + timeout:
                why, kill_at = "timed-out", now + grace
                _killpg(proc, signal.SIGTERM)
            elif kill_at is not None and now >= kill_at:
                _killpg(proc, signal.SIGKILL)
            time.sleep(POLL_S)
    except BaseException:
        _killpg(proc, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        raise
    finally:
        if proc.poll() is None:
            _killpg(proc, signal.SIGKILL)
            proc.wait()
    return proc.returncode, why, time.monotonic() - started


def _killpg(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, sig)


def _die_with_parent() -> None:
    """In the port's process: SIGTERM when the task's worker dies (its node lost), so the port stops and
    its sandboxed children with it instead of running on unowned."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _verified(out: Path) -> list[str]:
    """The signed files under `out` whose signature checks under this node's state key."""
    import json

    from porter import signing

    found = []
    for folder, _dirs, files in os.walk(out):
        for fname in files:
            if fname not in SIGNED_NAMES:
                continue
            path = Path(folder) / fname
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            if isinstance(doc, dict) and signing.json_problem(doc) is None:
                found.append(str(path.relative_to(out)))
    return found
