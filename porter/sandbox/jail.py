"""The jail of what porter builds or runs whole: a user's build command (``--build``, a Makefile), the
program toolchains' compiler runs over a user's tree, and each ``--run`` of a program.

A job child (:func:`porter.sandbox.wrap_command`) is porter's own Python, which puts seccomp and
Landlock in place itself.  These commands are other programs -- make, a compiler, the user's executable --
so the confinement is all around them, made by bubblewrap:

* a new root holding only what ``jail.toml`` lists, read-only (the system folders and a few files of
  /etc), the :class:`Jail`'s ``readable`` folders read-only (the tree a build compiles, the include
  folders the user named, ``--data`` folders), the toolchains' folders for builds (compilers, porter's
  Python and headers) or the runtime libraries' folders for runs, and the jail's ``writable`` folders
  (the scratch copy, the build's output folder) -- not /root, /home, other users' files, porter's
  caches or its other outputs;
* /tmp and /dev/shm are the jail's own ``home`` folder (on disk, inside its scratch), which is also
  HOME and TMPDIR; a minimal /dev (null, zero, random...) plus the GPU device nodes for runs; its own
  /proc;
* new PID, network (no interfaces), IPC and UTS namespaces, a new session; every capability dropped
  when porter runs as root;
* a scrubbed environment (:func:`porter.sandbox.environment.scrubbed`); no core files and a file-size
  cap (``prlimit``); stdout and stderr streamed to files capped in size by :func:`run`, and the whole
  jail killed past that cap or the timeout.

Where bubblewrap cannot work here (or ``PORTER_SANDBOX_DISABLE=bubblewrap``), the command runs under
Landlock instead (reads: the same folders and files; writes: the writable folders) in a private
network namespace where one can be made, and :func:`note` says so for the report -- except a run on a
GPU, whose driver does not start under Landlock (cudaMalloc fails; seen on an H200): it gets the
network namespace only.  With neither it runs unconfined, and the note says that.  ``--require-sandbox`` refuses both (:func:`refusal`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any

from porter import sandbox
from porter.sandbox.environment import scrubbed

DEFAULT_MAX_OUTPUT = 64 << 20  # bytes a jailed command may print to stdout, and to stderr (--max-output)
FILE_SIZE = sandbox.FILE_SIZE  # the largest file a jailed command may write
DRAIN_S = 5.0  # after a kill, how long the pipes are read before porter stops waiting on them
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Jail:
    """What one jailed command may touch (absolute paths)."""

    writable: tuple[str, ...]  # read-write (they must exist)
    readable: tuple[str, ...] = ()  # read-only besides the system's (missing ones are skipped)
    home: str = ""  # HOME, TMPDIR, /tmp and /dev/shm: a folder made if missing ("": writable[0])
    toolchain: bool = False  # the toolchains' folders readable too (builds)
    gpu: bool = False  # a run on a GPU: the GPU device nodes (and, under Landlock's fallback, no Landlock)

    @property
    def home_dir(self) -> str:
        return self.home or self.writable[0]


@dataclass(frozen=True)
class Ran:
    """How one jailed command ended."""

    exit: int | None  # None: it did not finish (stopped by porter) or never started
    seconds: float
    timed_out: bool = False
    overflow: str = ""  # "stdout" or "stderr": it printed more than the cap there and was stopped
    error: str = ""  # why it never ran (it could not start, or --require-sandbox refused it)

    def reason(self, timeout: float, max_output: int, timeout_option: str = "--timeout") -> str:
        """One line for a record when it did not finish by itself ("" when it did)."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {timeout:g} s ({timeout_option})"
        if self.overflow:
            return f"printed more than {_mib(max_output)} to {self.overflow} (--max-output): stopped"
        return ""


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"


# ------------------------------------------------------------------------------------- what it sees


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files("porter.sandbox").joinpath("jail.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _never_whole() -> set[str]:
    """Folders never bound whole because a search path happens to name them."""
    return {"/", "/home", "/root", "/tmp", "/var", "/run", "/mnt", "/media", "/srv", str(Path.home()), "/etc"}


def toolchain_folders() -> list[str]:
    """The toolchains' folders a build reads: :func:`porter.sandbox.toolchain_paths` (compilers on PATH,
    porter's Python and its tree), without /etc, /dev, /proc and /sys (bound on their own terms) and
    without a search path that names a home or the root itself."""
    skip = _never_whole() | {"/dev", "/proc", "/sys"}
    return [p for p in sandbox.toolchain_paths() if os.path.abspath(p) not in skip]


def runtime_folders() -> list[str]:
    """The folders of the toolchains' runtime libraries that a run reads (``LD_LIBRARY_PATH``,
    ``CUDA_PATH``...), beside the system's."""
    found: list[str] = []
    for var in _table()["runtime_variables"]:
        found += [p for p in os.environ.get(var, "").split(os.pathsep) if p and os.path.isabs(p)]
    return [p for p in dict.fromkeys(found) if os.path.abspath(p) not in _never_whole()]


def _etc() -> list[str]:
    return [f"/etc/{name}" for name in _table()["etc"]]


def _gpu_nodes() -> list[str]:
    try:
        names = sorted(os.listdir("/dev"))
    except OSError:
        return []
    return [f"/dev/{n}" for n in names if any(fnmatch.fnmatch(n, pat) for pat in _table()["gpu_devices"])]


def _readable(jail: Jail) -> list[str]:
    """Every folder (or file) the command reads, beside the writable ones."""
    paths = [*_table()["system"], *_etc(), *jail.readable]
    paths += toolchain_folders() if jail.toolchain else runtime_folders()
    if jail.gpu:
        paths += _table()["gpu_folders"]
    return [p for p in dict.fromkeys(os.path.abspath(p) for p in paths) if os.path.lexists(p)]


def _depth(path: str) -> int:
    return len(Path(path).parts)


def _covered(path: str, by: Sequence[str]) -> bool:
    return any(Path(path).is_relative_to(b) and path != b for b in by)


def _bwrap_args(jail: Jail, cwd: str) -> list[str]:
    """bubblewrap's arguments for `jail` (up to the ``--``)."""
    exe = shutil.which("bwrap") or "bwrap"
    args = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try"]
    if "network" not in sandbox.disabled():
        args.append("--unshare-net")
    if os.geteuid() == 0:  # root keeps every capability in the jail unless told (mounts, raw disks)
        args += ["--cap-drop", "ALL"]
    writable = [os.path.abspath(p) for p in jail.writable]
    home = os.path.abspath(jail.home_dir)
    readable = _readable(jail)
    mounts: list[tuple[str, list[str]]] = []  # (where, its arguments); parents before children
    for p in readable:
        # a folder inside another read-only one is already there (unless a writable one lies between)
        if _covered(p, readable) and not any(
            Path(p).is_relative_to(w) for w in writable if _covered(w, readable)
        ):
            continue
        if os.path.islink(p) and p in _table()["system"]:  # /bin -> usr/bin on a merged /usr
            mounts.append((p, ["--symlink", os.readlink(p), p]))
        else:
            mounts.append((p, ["--ro-bind", p, p]))
    mounts += [("/dev", ["--dev", "/dev"]), ("/proc", ["--proc", "/proc"])]
    if jail.gpu:
        mounts += [(n, ["--dev-bind", n, n]) for n in _gpu_nodes()]
    mounts += [("/tmp", ["--bind", home, "/tmp"]), ("/dev/shm", ["--bind", home, "/dev/shm"])]
    mounts += [(w, ["--bind", w, w]) for w in dict.fromkeys([*writable, home])]
    bound = [*readable, *writable, home]
    for hidden in sandbox._hidden():  # porter's config folder (its state key), should a bound one hold it
        if any(Path(hidden).is_relative_to(b) for b in bound):
            mounts.append((hidden, ["--tmpfs", hidden]))
    mounts.sort(key=lambda m: _depth(m[0]))  # stable: in the order above within one depth
    for _where, margs in mounts:
        args += margs
    return [*args, "--chdir", cwd]


def _landlock_args(jail: Jail, cwd: str) -> list[str]:
    """The trampoline that puts Landlock (and a network namespace) around the command: this module
    run by porter's Python (``-P``: the command's folder is never searched for modules)."""
    writable = [*jail.writable, jail.home_dir]
    spec = {
        "readable": [*_readable(jail), "/dev", "/proc"],
        "writable": [*writable, *sandbox._devices()],
        "net": "network" not in sandbox.disabled() and not sandbox._unshare_net_works(),
        "cwd": cwd,
    }
    return [sys.executable, "-P", "-m", "porter.sandbox.jail", json.dumps(spec), "--"]


@functools.cache
def _bwrap_problem() -> str:
    """'' when bubblewrap can make a program jail here, else why not."""
    problem = sandbox._bwrap_works()
    if problem:
        return problem
    with tempfile.TemporaryDirectory(prefix="porter-jail-probe-") as d:
        try:
            proc = subprocess.run(
                [*_bwrap_args(Jail((d,)), d), "--", "/bin/true"],
                capture_output=True,
                text=True,
                timeout=20,
                env=scrubbed(d),
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"bwrap failed: {err}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"bwrap cannot make the program jail here: {last}"
    return ""


def mode() -> tuple[str, str]:
    """("bubblewrap" | "landlock" | "none", why bubblewrap is not used: "" when it is)."""
    off = sandbox.disabled()
    why = f"disabled by {sandbox.DISABLE_ENV}" if "bubblewrap" in off else _bwrap_problem()
    if not why:
        return "bubblewrap", ""
    if "filesystem" not in off and sandbox._landlock_abi() > 0:
        return "landlock", why
    return "none", why


def note() -> str:
    """What a report says of how program builds and runs are confined here ("" with bubblewrap)."""
    kind, why = mode()
    if kind == "bubblewrap":
        return ""
    off = sandbox.disabled()
    net_problem = "disabled" if "network" in off else sandbox._unshare_net_works()
    net = (
        "no network (a private network namespace)"
        if not net_problem
        else f"the network is reachable (no network namespace: {net_problem})"
    )
    if kind == "landlock":
        gpu = (
            "; runs on a GPU get no Landlock (the GPU driver does not start under it) and can read every "
            "file porter can"
            if _gpu_nodes()
            else ""
        )
        return (
            f"program builds and runs are not in bubblewrap's jail ({why}): they run under Landlock "
            f"instead -- they can read the system and toolchain folders, write only their own copy{gpu}; "
            f"{net}"
        )
    return (
        f"program builds and runs are NOT confined here: bubblewrap cannot work ({why}) and Landlock is "
        f"unavailable; they can read every file porter can; {net}"
    )


def describe() -> str:
    """How program builds and runs are confined here, in one line (report.json's ``build.jail``)."""
    return note() or (
        "bubblewrap: builds and runs see the system and toolchains read-only, the program's tree and the "
        "-I folders named read-only, and write only their own copy and build folder; runs read the "
        "--data folders too; no home folder, no network"
    )


def refusal() -> str:
    """Why a jailed command is refused here ("" when it may run): ``--require-sandbox`` asks for
    bubblewrap's jail."""
    kind, why = mode()
    if kind == "bubblewrap" or not sandbox.required_by_env():
        return ""
    return (
        f"--require-sandbox: program builds and runs need bubblewrap's jail, which cannot work here ({why})"
    )


def require() -> None:
    """Raise SandboxError when :func:`refusal` refuses."""
    why = refusal()
    if why:
        raise sandbox.SandboxError(why)


def command(cmd: Sequence[str], jail: Jail, cwd: str | Path) -> list[str]:
    """`cmd` wrapped in the jail (as :func:`mode` says it can be made here), with no core files and the
    file-size cap."""
    cwd = os.path.abspath(cwd)
    kind, _why = mode()
    if kind == "bubblewrap":
        wrapped = [*_bwrap_args(jail, cwd), "--", *cmd]
    elif kind == "landlock" and not jail.gpu:  # a GPU driver does not start under Landlock (seen on an H200)
        wrapped = [*_landlock_args(jail, cwd), *cmd]
    else:
        tool = shutil.which("unshare")
        net = tool and "network" not in sandbox.disabled() and not sandbox._unshare_net_works()
        wrapped = [tool, "--net", "--", *cmd] if net and tool else list(cmd)
    limit = shutil.which("prlimit")
    if limit:
        wrapped = [limit, "--core=0", f"--fsize={FILE_SIZE}", "--", *wrapped]
    return wrapped


# ------------------------------------------------------------------------------------- running


def run(
    cmd: Sequence[str],
    jail: Jail,
    cwd: str | Path,
    *,
    stdout: Path,
    stderr: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float,
    max_output: int,
    trace_opens: Path | None = None,
) -> Ran:
    """Run `cmd` in `jail` from `cwd`, its stdout streamed to the file `stdout` and its stderr to
    `stderr` (None: into `stdout` too), each at most `max_output` bytes: past that, or past `timeout`
    seconds, every process of the command is killed and the result says which.  Its environment is
    :func:`porter.sandbox.environment.scrubbed` with `env` on top (HOME and TMPDIR: the jail's home).
    Porter holds at most one chunk of output in memory.  `trace_opens`: a file where the files the
    command failed to open are listed, by ``strace`` from outside the jail where this machine has it
    (see :func:`missing_files`)."""
    why = refusal()
    if why:
        return Ran(None, 0.0, error=why)
    Path(jail.home_dir).mkdir(parents=True, exist_ok=True)
    argv = command(cmd, jail, cwd)
    if trace_opens is not None and tracer():
        argv = [*_trace_args(trace_opens), *argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=scrubbed(jail.home_dir, env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr is not None else subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    except OSError as err:
        return Ran(None, 0.0, error=f"could not start {cmd[0]}: {err}")
    with contextlib.ExitStack() as stack:
        sinks: list[tuple[IO[bytes], IO[bytes], str]] = []
        assert proc.stdout is not None
        sinks.append((proc.stdout, stack.enter_context(stdout.open("wb")), "stdout"))
        if stderr is not None:
            assert proc.stderr is not None
            sinks.append((proc.stderr, stack.enter_context(stderr.open("wb")), "stderr"))
        timed_out, overflow = _pump(proc, sinks, start + timeout, max_output)
    seconds = time.monotonic() - start
    if timed_out or overflow:
        return Ran(None, seconds, timed_out=timed_out, overflow=overflow)
    return Ran(proc.returncode, seconds)


# the calls that open or look up a file by name, as strace names them, and the exec that starts the
# program (whose process's failed calls are the ones listed: the jail's own setup is not the program's)
_TRACED = "execve,open,openat,openat2,creat,access,faccessat,faccessat2,stat,lstat,newfstatat,statx"
_EXEC = re.compile(r'^(\d+)\s+execve\("((?:[^"\\]|\\.)*)".*= 0$')
_UNFINISHED = re.compile(r"^(\d+)\s+(.*?)\s*<unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$")
_FAILED_OPEN = re.compile(r'^(\d+)\s+(\w+)\((?:AT_FDCWD, |\d+, )?"((?:[^"\\]|\\.)*)".*= -1 (ENOENT|EACCES)')
# what a program's startup looks up that it never needed (the loader, locales, drivers, the system)
_SYSTEM = (
    "/usr/",
    "/lib",
    "/etc/",
    "/proc/",
    "/sys/",
    "/dev/",
    "/opt/",
    "/run/",
    "/var/",
    "/selinux",
    "/snap/",
)


def tracer() -> str:
    """The ``strace`` that :func:`run` lists a command's failed opens with ("" where there is none, or
    where this machine does not let it trace, as some containers do not)."""
    return _tracer(os.environ.get("PATH", ""))


@functools.cache
def _tracer(path: str) -> str:  # by PATH: what one PATH lacked says nothing of another
    tool = shutil.which("strace", path=path)
    if not tool:
        return ""
    try:
        probe = subprocess.run(
            [tool, "-f", "-qq", "-e", "trace=openat", "-o", os.devnull, "true"],
            capture_output=True, timeout=60, check=False,  # a loaded machine is slow, not unable
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return tool if probe.returncode == 0 else ""


def _trace_args(out: Path) -> list[str]:
    # -f: through the jail's own processes to the program's; only the calls named (a few hundred lines)
    return [tracer(), "-f", "-qq", "--seccomp-bpf", f"-etrace={_TRACED}", "-o", str(out)]


def missing_files(trace: Path, program: str, limit: int = 8) -> list[str]:
    """The files `program` (its argv[0]) tried to open and did not find or could not read, in a command
    traced by :func:`run`'s `trace_opens`, as it named them, in the order it tried them: its own data
    files, not the loader's libraries, locales, drivers or anything else under the system's folders."""
    try:
        lines = trace.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    pid, found = "", []
    for line in _resumed(lines):
        started = _EXEC.match(line)
        if started is not None and started.group(2) == program:
            pid = started.group(1)
            continue
        m = _FAILED_OPEN.match(line)
        if m is None or m.group(1) != pid:
            continue
        name = m.group(3)
        if name.startswith(_SYSTEM) or name in ("/usr", "/tmp", "/selinux") or ".so" in Path(name).name:
            continue
        if name not in found:
            found.append(name)
        if len(found) >= limit:
            break
    return found


def _resumed(lines: list[str]) -> list[str]:
    """The trace's lines with each call that another process interrupted ("... <unfinished ...>", later
    "PID <... call resumed>...") joined into one line where it started, as if it had not been."""
    joined: list[str] = []
    pending: dict[str, int] = {}  # pid -> where its unfinished call's line is in `joined`
    for line in lines:
        unfinished = _UNFINISHED.match(line)
        if unfinished is not None:
            pending[unfinished.group(1)] = len(joined)
            joined.append(f"{unfinished.group(1)} {unfinished.group(2)}")
            continue
        resumed = _RESUMED.match(line)
        if resumed is not None and resumed.group(1) in pending:
            at = pending.pop(resumed.group(1))
            joined[at] += resumed.group(2)
            continue
        joined.append(line)
    return joined


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the command's process group (its session: it was started in a new one)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the command's first process has exited, without reaping it (so its process group id
    stays its own while porter kills what is left of the group)."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _pump(
    proc: subprocess.Popen[bytes], sinks: list[tuple[IO[bytes], IO[bytes], str]], deadline: float, cap: int
) -> tuple[bool, str]:
    """Copy each pipe to its file until both close: (timed out, the stream that passed `cap`)."""
    selector = selectors.DefaultSelector()
    written: dict[str, int] = {}
    for pipe, sink, name in sinks:
        selector.register(pipe, selectors.EVENT_READ, (sink, name))
        written[name] = 0
    timed_out, overflow = False, ""
    killed = False  # by porter (timeout, cap): what is still in the pipes is not kept
    stop_waiting: float | None = None  # when porter gives up on the pipes (after it ended or was killed)
    finished = False
    try:
        while selector.get_map():
            now = time.monotonic()
            if not killed and now >= deadline:
                timed_out = killed = True
                _kill(proc)
                stop_waiting = now + DRAIN_S
            if stop_waiting is not None and now >= stop_waiting:
                break
            if not finished and _exited(proc):  # what it left behind would hold the pipes: gone too
                finished = True
                _kill(proc)
                stop_waiting = stop_waiting or now + DRAIN_S
            wait = min(0.25, max(0.0, (stop_waiting or deadline) - now))
            for key, _events in selector.select(timeout=wait):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                if killed:
                    continue
                sink, name = key.data
                room = cap - written[name]
                if len(chunk) > room:
                    sink.write(chunk[: max(room, 0)])
                    written[name] = cap
                    overflow, killed = name, True
                    _kill(proc)
                    stop_waiting = time.monotonic() + DRAIN_S
                    continue
                sink.write(chunk)
                written[name] += len(chunk)
    finally:
        selector.close()
        for pipe, _sink, _name in sinks:
            pipe.close()
    if not finished:
        _kill(proc)
    try:
        proc.wait(timeout=DRAIN_S)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()
    return timed_out, overflow


def read_tail(path: Path, chars: int) -> str:
    """The last `chars` characters of a text file ("..." before them when there was more), read from its
    end only."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 4 * chars))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text if len(text) <= chars and len(data) == size else "..." + text[-chars:]


# ------------------------------------------------------------------------------------- the trampoline


def _confine(argv: Sequence[str]) -> None:
    """``python -m porter.sandbox.jail SPEC -- CMD...``: Landlock and a network namespace, then CMD."""
    from porter.sandbox import landlock

    spec = json.loads(argv[0])
    cmd = list(argv[2:])
    if spec.get("net"):
        try:
            sandbox._unshare_net()
        except OSError as err:
            print(f"porter jail: no network namespace: {err}", file=sys.stderr)
            os._exit(126)
    try:
        landlock.restrict(spec["readable"], spec["writable"], scope=True)
    except landlock.LandlockError as err:
        print(f"porter jail: Landlock refused: {err}", file=sys.stderr)
        os._exit(126)
    os.chdir(spec["cwd"])
    try:
        os.execvp(cmd[0], cmd)
    except OSError as err:
        print(f"porter jail: {cmd[0]}: {err}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    _confine(sys.argv[1:])


__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "Jail",
    "Ran",
    "command",
    "missing_files",
    "mode",
    "note",
    "read_tail",
    "refusal",
    "require",
    "run",
    "tracer",
]
