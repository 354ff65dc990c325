"""How every child that compiles or runs code is confined.

The parent (:mod:`porter.backends.isolate`) starts each child through :func:`wrap_command` and hands it
a :class:`Plan` in the environment; the child calls :func:`enter` first thing and :func:`lock_down`
right before it loads a binary built from code porter did not write (a kernel, a model's candidate):

===============  ==================================================================================
layer            what it does
===============  ==================================================================================
process-group    the child leads its own session; a timeout or an interrupted porter kills the group
parent-death     ``PR_SET_PDEATHSIG``: the child is killed when porter dies, even by SIGKILL
rlimits          address space (CPU devices, the emulator and checkers) or data segment (GPUs), CPU
                 time, file size, open files -- for the compilers the child runs too
bubblewrap       ``bwrap``: a private PID namespace (every process of the job dies with it), the whole
                 file system read-only except the job's scratch folder and the compile cache
network          a private network namespace with no interfaces (bubblewrap, or ``unshare``)
filesystem       Landlock: read and execute only beneath the toolchain's folders; write only to the
                 scratch folder (and, while compiling, the compile cache); no TCP; no signals out
seccomp          no process creation, no sockets, no ptrace, no mounts (see :mod:`.seccomp`)
===============  ==================================================================================

``seccomp`` and the last Landlock layer are installed before the binary is loaded, so constructors and
global initialisers of the loaded code already run under them.  Which layers are active here is
:func:`layers` (shown by ``porter doctor`` and in every report that ran model code);
``PORTER_SANDBOX_DISABLE=bubblewrap,network,...`` turns layers off for debugging, and
``--require-sandbox`` (:func:`require`) refuses to run code without all of :data:`REQUIRED`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path

from porter.sandbox import landlock, seccomp

PLAN_ENV = "PORTER_SANDBOX_PLAN"
DISABLE_ENV = "PORTER_SANDBOX_DISABLE"
REQUIRE_ENV = "PORTER_REQUIRE_SANDBOX"
LAYER_NAMES = (
    "process-group",
    "parent-death",
    "rlimits",
    "bubblewrap",
    "network",
    "filesystem",
    "seccomp",
)
# What --require-sandbox insists on (bubblewrap is one way to get network and more, not a need).
# Layers backend probes go without: a driver's first initialisation (cuInit) fails under them
# (bench/sandbox_cuda_probe.py).  Probes run no code from a model; GPU jobs initialise the driver
# before entering the sandbox instead, and then get every layer.
PROBE_WITHOUT = ("filesystem", "seccomp")
REQUIRED = ("process-group", "parent-death", "rlimits", "network", "filesystem", "seccomp")

# Resource limits of every child (the parent's wall-clock timeout comes on top).
CPU_MEMORY_FRACTION = 0.8  # of physical memory: the address-space cap of CPU-side children
MIN_MEMORY = 2 << 30
FILE_SIZE = 4 << 30
OPEN_FILES = 4096

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000


class SandboxError(RuntimeError):
    """A layer the run requires could not be put in place."""


@dataclass(frozen=True)
class Layer:
    name: str
    active: bool
    detail: str


@dataclass(frozen=True)
class Limits:
    address_space: int | None  # bytes; None: not capped (GPU drivers map huge virtual ranges)
    data: int | None  # bytes of data segment (private writable memory); used where the address space is not
    cpu_seconds: int
    file_size: int = FILE_SIZE
    open_files: int = OPEN_FILES


@dataclass(frozen=True)
class Plan:
    """What the parent asks of one child.  Plain data, passed as JSON in the environment."""

    scratch: str
    cache: str = ""  # writable while compiling, read-only once code is loaded
    readable: tuple[str, ...] = ()  # beyond the toolchain folders found by :func:`toolchain_paths`
    limits: Limits = field(default_factory=lambda: Limits(None, None, 600))
    disabled: tuple[str, ...] = ()
    required: bool = False
    in_bubblewrap: bool = False
    in_netns: bool = False  # the whole command (a checker wrapper included) already runs in a new netns
    # the seccomp filter also on the threads the child has before lock_down (a runtime's workers); off
    # only for a child whose runtime must start a process from one of them (PoCL's linker, called when a
    # user's module builds its kernels after the sandbox is complete: backends/pycall.py)
    filter_existing_threads: bool = True

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_env(text: str) -> Plan:
        raw = json.loads(text)
        lim = raw.pop("limits")
        return Plan(
            limits=Limits(**lim),
            readable=tuple(raw.pop("readable")),
            disabled=tuple(raw.pop("disabled")),
            **raw,
        )


# ------------------------------------------------------------------------------------- probing


# The layers PORTER_SANDBOX_DISABLE can turn off (the process group, parent death and limits are
# always set).
OPTIONAL = ("bubblewrap", "network", "filesystem", "seccomp")


def disabled() -> tuple[str, ...]:
    names = [n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()]
    return tuple(n for n in names if n in OPTIONAL)


def required_by_env() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


@cache
def _bwrap_works() -> str:
    """'' when bubblewrap can make the namespaces porter uses here, else why not."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bwrap not found (apt-get install bubblewrap)"
    try:
        proc = subprocess.run(
            [exe, *_BWRAP_BASE, "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bwrap failed: {err}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"bwrap cannot create namespaces here: {last}"
    return ""


@cache
def _unshare_net_works() -> str:
    """'' when a child can enter a new network namespace by itself (root, or user namespaces)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "import porter.sandbox as s; s._unshare_net()"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["unshare failed"])[-1]


@cache
def _landlock_abi() -> int:
    return landlock.abi_version()


@cache
def _seccomp_problem() -> str:
    return seccomp.available()


def layers() -> tuple[Layer, ...]:
    """Every layer and whether a child started now gets it, with what it is or why it is missing."""
    off = set(disabled())
    bwrap_problem = _bwrap_works()
    bwrap = not bwrap_problem and "bubblewrap" not in off
    abi = _landlock_abi()
    sec = _seccomp_problem()
    if bwrap:  # the unshare probe (a child Python) only where bubblewrap cannot give the namespace
        net = (True, "private network namespace (bubblewrap --unshare-net)")
    elif not (unshare_problem := _unshare_net_works()):
        net = (True, "private network namespace (unshare)")
    else:
        net = (False, f"no network namespace: {unshare_problem}")
    found = {
        "process-group": (True, "own session; the group is killed on timeout or interruption"),
        "parent-death": (sys.platform == "linux", "PR_SET_PDEATHSIG=SIGKILL"),
        "rlimits": (True, "address space or data, CPU time, file size, open files"),
        "bubblewrap": (bwrap, "PID namespace, read-only root" if bwrap else bwrap_problem or "disabled"),
        "network": net,
        "filesystem": (
            abi > 0,
            f"Landlock ABI {abi}: write only to the job's scratch folder"
            if abi > 0
            else "Landlock is not available in this kernel",
        ),
        "seccomp": (not sec, sec if sec else "no exec/fork, sockets, ptrace, mounts"),
    }
    out = []
    for name in LAYER_NAMES:
        active, detail = found[name]
        if name in off:
            active, detail = False, f"disabled by {DISABLE_ENV}"
        out.append(Layer(name, active, detail))
    return tuple(out)


def missing_required() -> list[Layer]:
    return [layer for layer in layers() if layer.name in REQUIRED and not layer.active]


def require() -> None:
    """Raise SandboxError naming every required layer that is missing here."""
    missing = missing_required()
    if missing:
        what = "; ".join(f"{m.name} ({m.detail})" for m in missing)
        raise SandboxError(f"--require-sandbox: missing sandbox layers: {what}")


def summary(found: Sequence[Layer] | None = None) -> dict[str, object]:
    """The ``sandbox`` object of reports (doctor's and those that ran model code): `found`, by
    default the layers a child started now gets."""
    found = layers() if found is None else found
    return {
        "layers": {layer.name: {"active": layer.active, "detail": layer.detail} for layer in found},
        "complete": all(layer.active for layer in found if layer.name in REQUIRED),
    }


# ------------------------------------------------------------------------------------- the parent side


def limits_for(kind: str | None, timeout_s: float, memory_mb: int | None) -> Limits:
    """Limits of a child running on a device of `kind` ("gpu", "cpu", "emulator", "checker"; None:
    compile only).  `memory_mb` overrides the memory cap (0: no cap)."""
    cpus = os.cpu_count() or 1
    cpu_seconds = int(max(timeout_s, 1.0) * cpus) + 30
    if memory_mb == 0:
        return Limits(None, None, cpu_seconds)
    if memory_mb is not None:
        cap = memory_mb << 20
    else:
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            physical = 8 << 30
        cap = max(int(physical * CPU_MEMORY_FRACTION), MIN_MEMORY)
    if kind == "gpu":  # drivers reserve huge virtual ranges: cap private data instead
        return Limits(None, cap, cpu_seconds)
    return Limits(cap, None, cpu_seconds)


_BWRAP_BASE = (
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--ro-bind",
    "/",
    "/",
    "--dev-bind",
    "/dev",
    "/dev",
    "--proc",
    "/proc",
)


def wrap_command(cmd: Sequence[str], plan: Plan) -> tuple[list[str], Plan]:
    """`cmd` inside bubblewrap when it works here (and is not disabled), with the plan the child gets.

    Without bubblewrap, the whole command enters one new network namespace through util-linux
    ``unshare --net`` where that works: a checker wrapper (compute-sanitizer) and the child it starts
    talk over abstract unix sockets, which belong to a network namespace, so both must share one."""
    if "bubblewrap" in plan.disabled or _bwrap_works():
        tool = shutil.which("unshare")
        if tool and "network" not in plan.disabled and not _unshare_net_works():
            return [tool, "--net", "--", *cmd], replace(plan, in_netns=True)
        return list(cmd), plan
    exe = shutil.which("bwrap") or "bwrap"
    binds: list[str] = []
    for path in (plan.scratch, plan.cache):  # both exist: the job's folder, made by child_plan
        if path:
            binds += ["--bind", path, path]
    binds += [arg for path in _hidden() for arg in ("--tmpfs", path)]  # the state key's folder
    if os.geteuid() == 0:  # root keeps every capability inside bubblewrap unless told (mounts, raw I/O)
        binds += ["--cap-drop", "ALL"]
    # /dev/shm stays the host's under --dev-bind; shared memory of the job goes to a private tmpfs
    wrapped = [exe, *_BWRAP_BASE, "--tmpfs", "/dev/shm", *binds, "--chdir", plan.scratch, "--", *cmd]
    return wrapped, replace(plan, in_bubblewrap=True)


def _hidden() -> list[str]:
    """Folders a child never sees, even read-only: porter's config folder, where the state key that
    signs caches and reports lives (:func:`porter.signing.config_dir`, which imports this module)."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    folder = Path(xdg).expanduser() / "porter" if xdg else Path.home() / ".config" / "porter"
    return [str(folder)] if folder.is_dir() else []


# ------------------------------------------------------------------------------------- the child side


@cache
def toolchain_paths() -> list[str]:
    """Folders a child may read and execute beneath: the system, Python and its packages, the
    toolchains on PATH and the OpenCL registrations -- not the user's home or projects."""
    paths = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev"}
    paths |= {"/run/nvidia-persistenced", "/var/lib/dkms", "/usr/local"}
    paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "scripts"):
        with contextlib.suppress(KeyError):
            paths.add(sysconfig.get_paths()[key])
    paths |= {p for p in sys.path if p and os.path.isdir(p)}
    for var in ("PATH", "LD_LIBRARY_PATH", "CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "HIP_PATH"):
        paths |= {p for p in os.environ.get(var, "").split(os.pathsep) if p and os.path.isabs(p)}
    for var in ("OCL_ICD_VENDORS", "OCL_ICD_FILENAMES", "LD_PRELOAD"):
        for p in os.environ.get(var, "").replace(":", " ").split():
            if os.path.isabs(p):
                paths.add(p if os.path.isdir(p) else os.path.dirname(p))
    import porter

    paths.add(str(Path(porter.__file__).resolve().parent.parent))  # an editable install's tree
    return sorted(paths)


def _unshare_net() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}")


def _set_limits(limits: Limits) -> None:
    def lower(which: int, value: int | None) -> None:
        if value is None:
            return
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        if soft == resource.RLIM_INFINITY or value < soft:
            resource.setrlimit(which, (value, hard))

    lower(resource.RLIMIT_AS, limits.address_space)
    lower(resource.RLIMIT_DATA, limits.data)
    lower(resource.RLIMIT_CPU, limits.cpu_seconds)
    lower(resource.RLIMIT_FSIZE, limits.file_size)
    lower(resource.RLIMIT_NOFILE, limits.open_files)


@dataclass
class State:
    """What the child put in place, reported back to the parent with the result."""

    active: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def note(self, name: str, ok: bool, detail: str) -> None:
        (self.active if ok else self.missing)[name] = detail


_STATE = State()


def state() -> State:
    return _STATE


def current_plan() -> Plan | None:
    text = os.environ.get(PLAN_ENV)
    return Plan.from_env(text) if text else None


def enter(plan: Plan) -> State:
    """First thing in a child: parent death, limits, network, and the compile-time file-system layer."""
    st = _STATE
    libc = ctypes.CDLL(None, use_errno=True)
    ok = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    st.note("parent-death", ok, "PR_SET_PDEATHSIG" if ok else "prctl failed")
    if ok and os.getppid() == 1 and not plan.in_bubblewrap:
        os._exit(137)  # the parent died before the signal was armed
    st.note("process-group", True, "own session, made by the parent")
    try:
        _set_limits(plan.limits)
        st.note("rlimits", True, "set")
    except (ValueError, OSError) as err:
        st.note("rlimits", False, str(err))
    if plan.in_bubblewrap:
        st.note("bubblewrap", True, "PID, network, IPC namespaces; read-only root")
        st.note("network", True, "bubblewrap --unshare-net")
    elif plan.in_netns:
        st.note("network", True, "unshare --net (with the wrapper)")
    elif "network" not in plan.disabled:
        try:
            _unshare_net()
            st.note("network", True, "unshare(CLONE_NEWNET)")
        except OSError as err:
            st.note("network", False, str(err))
    if "filesystem" not in plan.disabled:
        writable = [plan.scratch, *([plan.cache] if plan.cache else []), *_devices()]
        _landlock(st, [*toolchain_paths(), *plan.readable], writable, scope=False)
    _check_required(plan, st, ("parent-death", "rlimits", "network"))
    return st


def lock_down(plan: Plan) -> State:
    """Right before loading code porter did not write: writes only to the scratch folder, then seccomp."""
    st = _STATE
    if "filesystem" not in plan.disabled:
        _landlock(
            st, [*toolchain_paths(), *plan.readable, plan.cache], [plan.scratch, *_devices()], scope=True
        )
    if "seccomp" not in plan.disabled:
        try:
            seccomp.install(all_threads=plan.filter_existing_threads)
            st.note(
                "seccomp",
                True,
                "installed before load"
                if plan.filter_existing_threads
                else "installed before load (threads started before it, the OpenCL runtime's, unfiltered)",
            )
        except seccomp.SeccompUnavailable as err:
            st.note("seccomp", False, str(err))
    _check_required(plan, st, REQUIRED)
    return st


def _devices() -> list[str]:
    """Device files a child writes to: the null device, GPU drivers, the job's shared memory."""
    found = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random", "/dev/shm", "/dev/dri"]
    with contextlib.suppress(OSError):
        found += [f"/dev/{n}" for n in os.listdir("/dev") if n.startswith(("nvidia", "kfd"))]
    return found


def _landlock(st: State, readable: list[str], writable: list[str], scope: bool) -> None:
    try:
        abi = landlock.restrict([p for p in readable if p], [p for p in writable if p], scope=scope)
        st.note("filesystem", True, f"Landlock ABI {abi}")
    except landlock.LandlockError as err:
        st.note("filesystem", False, str(err))


def _check_required(plan: Plan, st: State, names: Sequence[str]) -> None:
    if not plan.required:
        return
    missing = [f"{n} ({st.missing.get(n, 'not set up')})" for n in names if n not in st.active]
    if missing:
        raise SandboxError("required sandbox layers missing in the child: " + "; ".join(missing))


__all__ = [
    "LAYER_NAMES",
    "REQUIRED",
    "Layer",
    "Limits",
    "Plan",
    "SandboxError",
    "State",
    "enter",
    "layers",
    "limits_for",
    "lock_down",
    "require",
    "summary",
    "toolchain_paths",
    "wrap_command",
]
