"""The Backend contract: a device is a compiler + an allocator + a program.

Every API porter can compile for or run on (cuda, hip, opencl, cpu emulation) is one
sub-package implementing :class:`Backend`.  Sub-packages are imported lazily through
:func:`get_backend`, so `porter scan` never pulls a GPU stack.

The contract, in short::

    be = get_backend("cuda")
    be.availability()                 # can it compile? run? which toolchain? install hint?
    devs = be.devices()               # what can run here (maybe []: compile-only)
    binary = be.compile(src, "saxpy", CompileOptions(arch="sm_90"))   # pure; raises CompileError
    prog = be.load(binary, devs[0])
    x = be.to_device(np.arange(10, dtype=np.float32), devs[0])
    y = be.alloc(40, devs[0])
    prog(x, y, np.int32(10), grid=(1,), block=(32,))             # launch
    ms = prog(x, y, np.int32(10), grid=(1,), block=(32,), timed=True)  # device-event time
    out = be.to_host(y, np.float32, (10,))

Hardware facts (warp size, max threads per block, shared memory per block...) are data:
``backends/<name>/dialect.toml`` and the device table in ``porter/harness``.

Compiling and running user or generated code happens in isolated child processes
(:mod:`porter.backends.isolate`); the objects here are what those children use.

Each target is one folder, ``backends/<name>/``, holding everything about it: ``dialect.toml``
(one schema for all: :class:`porter.backends.dialect.DialectFacts`), the backend class (this
contract), ``dialect.py`` (:class:`porter.backends.dialect.Dialect`: its translator, the contract and
screening of model output in it), its checkers and install hints.  Code outside ``backends/`` asks the
registry (:func:`get_backend`, :func:`get_dialect`, :func:`runners`, :func:`translation_targets`)
instead of comparing target names; a new target registers with :func:`register_backend` and
:func:`register_dialect` (``tests/fakes/toy`` does, from the tests).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from porter.backends.dialect import Dialect, DialectFacts

BACKEND_NAMES: tuple[str, ...] = ("cuda", "hip", "opencl", "cpu")


@dataclass(frozen=True)
class HardwareFacts:
    warp_size: int
    max_threads_per_block: int
    shared_mem_per_block: int  # bytes
    multiprocessors: int | None = None
    subgroups: bool = False  # OpenCL: cl_khr_subgroups / intel subgroups available


def pci_uid(domain: object, bus: object, slot: object) -> str:
    """A device's :attr:`Device.uid` from its PCI domain, bus and device numbers ("pci:0000:1b:00"), "" when
    they are not numbers."""
    try:
        return f"pci:{int(domain):04x}:{int(bus):02x}:{int(slot):02x}"  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of this machine as a process can be given it alone (``porter port --suite`` pins each program
    to one): ``env`` is what makes it that process's only GPU (``CUDA_VISIBLE_DEVICES=GPU-...``)."""

    uid: str  # the same identity a Device of that GPU has (Device.uid), or the vendor's own id
    name: str
    env: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Device:
    backend: str  # which Backend owns it
    name: str  # human name: "NVIDIA H200", "pthread-haswell-AMD EPYC", "cpu-emulator"
    arch: str  # "sm_90", "gfx90a", "opencl-3.0", "x86_64"
    kind: str  # "gpu" | "cpu" | "emulator" | "checker"
    index: int = 0
    platform: str = ""  # OpenCL platform name / runtime flavour ("hip-on-cuda")
    driver: str = ""
    facts: HardwareFacts = field(default_factory=lambda: HardwareFacts(32, 1024, 48 * 1024))
    # the hardware itself, the same whichever backend sees it and whatever CUDA_VISIBLE_DEVICES renumbers:
    # "pci:0000:1b:00" (its PCI address), "" where the backend cannot say
    uid: str = ""
    # its compiler fuses a*b+c into one rounding (an FMA) by default: OpenCL C's FP_CONTRACT, nvcc's and
    # NVRTC's --fmad=true, hipcc's -ffp-contract=fast; porter's CPU emulator (ISO C++) does not
    contracts: bool = False
    # what builds kernels for it, as far as their rounding goes: NVIDIA's NVVM (nvcc, NVRTC, HIP on CUDA),
    # AMD's clang (hipcc), an OpenCL driver's own compiler (its platform), porter's emulator (g++); "" unknown.
    # A port on a device whose compiler the original was never built with is judged with the original's own
    # spread between the compilers it was built with (porter.harness.replay.cross_device_floors)
    compiler: str = ""

    @property
    def label(self) -> str:
        """Stable, human-readable id used in verdicts and reports: backend:name[index]."""
        return f"{self.backend}:{self.name}" + (f"#{self.index}" if self.index else "")

    @property
    def physical(self) -> str:
        """What timings on this device contend for: its PCI address where known (the CUDA and the OpenCL
        view of one GPU are one device; two GPUs of one model, each a process's device 0, are two), else its
        label."""
        return self.uid or self.label

    # What the harness may ask of a device -- its role -- so that no code outside ``backends/`` reads
    # ``kind`` (tests/unit/test_device_roles.py holds it to that).

    @property
    def role(self) -> str:
        """``"times"`` (a GPU: its times say something about GPU speed; it runs and is timed),
        ``"checks"`` (a memory/race checker: it runs kernels to find their faults, never as a reference
        or a timer) or ``"runs"`` (a CPU device or the emulator: it runs and validates)."""
        return {"gpu": "times", "checker": "checks"}.get(self.kind, "runs")

    @property
    def times(self) -> bool:
        """Its timings stand for GPU speed: benchmarked with the GPU plan at GPU sizes."""
        return self.role == "times"

    @property
    def checks(self) -> bool:
        """A checker (compute-sanitizer, Oclgrind): not a reference, not timed."""
        return self.role == "checks"

    @property
    def native(self) -> bool:
        """A real device (a GPU or a CPU's own runtime), not porter's emulator or a checker: what a
        generated module's GPU stacks (CuPy, HIP Python, pyopencl) open."""
        return self.kind in ("gpu", "cpu")

    @property
    def host_cores(self) -> int | None:
        """A CPU device's cores (its compute units), for a CPU roofline; None for any other device."""
        return self.facts.multiprocessors if self.kind == "cpu" else None

    @property
    def size_class(self) -> str:
        """``"gpu"`` or ``"cpu"``: which problem sizes suit it (:func:`porter.harness.spec.timing_size`)."""
        return "gpu" if self.times else "cpu"


@dataclass(frozen=True)
class CompileOptions:
    arch: str | None = None  # None: the device's arch, else the backend default
    defines: tuple[str, ...] = ()  # "N=1024", "USE_FAST"
    include_dirs: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()  # extra compiler flags, passed through verbatim
    output: str | None = None  # backend-specific format: "cubin" | "ptx" | "hsaco" | "so" ...
    debug: bool = False
    # Code porter did not get from the user (a model's candidate): backends that build device code for
    # the host (the CPU emulator) build it with the host's process, file and environment functions
    # poisoned.
    untrusted: bool = False

    def key(self) -> str:
        return repr(
            (self.arch, self.defines, self.include_dirs, self.flags, self.output, self.debug, self.untrusted)
        )


@dataclass(frozen=True)
class ResourceReport:
    registers: int | None = None
    shared_bytes: int | None = None  # static shared memory per block
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    raw: str = ""


@dataclass(frozen=True)
class Binary:
    backend: str
    entry: str  # symbol to launch (lowered/mangled name where relevant)
    arch: str
    format: str
    data: bytes
    toolchain: str
    log: str = ""
    report: ResourceReport | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Availability:
    name: str
    compile: bool
    run: bool
    toolchain: str  # "" when none found
    devices: tuple[Device, ...] = ()
    hint: str = ""  # one line: what to install for what is missing
    details: tuple[str, ...] = ()


def gpu_slots() -> list[GpuSlot]:
    """Every GPU of this machine a child process can be pinned to, over all backends, each once (by uid);
    empty on a machine without GPUs or their vendors' tools."""
    found: dict[str, GpuSlot] = {}
    for name in backend_names():
        try:
            slots = get_backend(name).gpu_slots()
        except Exception:  # noqa: BLE001 - a backend that cannot say offers no GPU
            continue
        for slot in slots:
            found.setdefault(slot.uid, slot)
    return list(found.values())


def number_source(source: str) -> str:
    """The source with right-aligned line numbers, as compile errors show it."""
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))


class BackendError(Exception):
    """Base of the errors a backend raises (inside the harness they become Verdicts)."""


def first_error(log: str) -> str:
    """The compiler's first error line of `log` ("" when it has none)."""
    return next((line.strip() for line in log.splitlines() if "error" in line.lower()), "")[:500]


class CompileError(BackendError):
    """`summary`, when given, is the first line instead of 'compile of ... failed': a refusal the
    backend can name in one line (a kernel name its compiler cannot take)."""

    def __init__(
        self,
        backend: str,
        log: str,
        source: str,
        options: Sequence[str] = (),
        entry: str = "",
        *,
        summary: str = "",
    ):
        self.backend = backend
        self.log = log
        self.source = source
        self.options = tuple(options)
        self.entry = entry
        self.summary = summary
        super().__init__(self.render())

    def render(self) -> str:
        opts = " ".join(self.options)
        said = first_error(self.log)  # the compiler's own words first: what a reader acts on
        first = self.summary or (
            f"compile of {self.entry or 'source'} failed{': ' + said if said else ''} (options: {opts or '-'})"
        )
        return f"{self.backend}: {first}\n{self.log.rstrip()}\n--- source ---\n{number_source(self.source)}"


class LaunchError(BackendError):
    pass


class ToolchainMissing(BackendError):
    """The toolchain this operation needs is not installed; the message is the install hint."""


class CannotEmulate(BackendError):
    """The CPU emulator met a construct it cannot model faithfully. Message: 'cannot emulate: ...'."""


@runtime_checkable
class Program(Protocol):
    def __call__(
        self,
        *args: Any,
        grid: Sequence[int],
        block: Sequence[int],
        shared_bytes: int = 0,
        timed: bool = False,
    ) -> float | None: ...


@dataclass(frozen=True)
class CheckerFinding:
    """One problem a checker reported (an out-of-bounds access, a race...)."""

    kind: str  # "out-of-bounds" | "uninitialized" | "data-race" | ...
    message: str
    line: int | None = None
    code: str | None = None
    # a race's other access, and who made each access (the checker's words, first side first)
    other_line: int | None = None
    other_code: str | None = None
    entities: tuple[str, ...] = ()


class Backend(Protocol):
    """What every backend folder implements (most backends inherit :class:`BackendBase` for the
    optional abilities' defaults)."""

    name: ClassVar[str]
    # The source dialects whose code it executes, its own first (the CPU emulator runs CUDA and HIP).
    runs: ClassVar[tuple[str, ...]]
    # Whether loaded programs take module globals (``__constant__`` data) through set_symbol; a backend
    # without them receives such data as added kernel arguments.
    sets_symbols: ClassVar[bool]
    # Whether a variant can be built here for its device without a device (a compile-only check).
    builds_without_device: ClassVar[bool]
    # Whether its runtime builds code from worker threads it starts before a sandbox is complete (PoCL
    # links each kernel by starting a linker from one): a child calling a user's module that builds
    # such code cannot filter the system calls of threads that already exist.
    builds_from_early_threads: ClassVar[bool]
    # Whether its runs read the warp-shuffle lanes CUDA leaves undefined as 0, count such reads and can run
    # again with them reading a poison pattern (Job.poison_undefined_lanes): the CPU emulator
    poisons_undefined_lanes: ClassVar[bool]
    # Build flags that make its runs read those lanes as the poison pattern, where it cannot switch a loaded
    # program over (OpenCL: porter's translation reads them through its own helpers) -- such a backend does not
    # count the reads either, so a replay judging a port against an original that depends on them runs the
    # port both ways. Empty for the CPU emulator, which switches at run time and counts
    poison_lanes_flags: ClassVar[tuple[str, ...]]
    # Whether its child can watch a launch's stores into the arguments' buffers (Job.watch_writes: the buffers are
    # the child's own guarded host memory, porter.backends.guards): the CPU emulator
    watches_writes: ClassVar[bool]

    @property
    def dialect(self) -> DialectFacts:
        """Its folder's ``dialect.toml`` (:class:`porter.backends.dialect.DialectFacts`)."""
        ...

    def install_hints(self) -> dict[str, str]:
        """``compile`` / ``run``: one line each, what to install (``porter doctor``)."""
        ...

    def compile_archs(self) -> list[str]:
        """The archs every variant is also compiled for here without such a device (``porter port``)."""
        ...

    def device_check_archs(self) -> list[str]:
        """The archs model-written code must build for as device code, tried in order."""
        ...

    def missing_requirements(self, device: Device, requires: Sequence[str]) -> list[str]:
        """What of a translation's needs (sub-groups...) `device` lacks."""
        ...

    def requirement_options(self, device: Device, requires: Sequence[str]) -> tuple[str, ...]:
        """Build flags a kernel with those needs takes on `device` (``-cl-std=CL3.0``...)."""
        ...

    def describe_requirements(self, requires: Sequence[str], device: Device | None = None) -> str:
        """Human words for a translation's needs; with `device`, those it declares but failed porter's probe
        of say so."""
        ...

    def probed_options(self, device: Device) -> tuple[str, ...]:
        """Build flags every kernel build on `device` takes from this process's probe of it -- a job's child
        adopts the device unprobed (:meth:`adopt`), so the parent hands them over with the job's options
        (OpenCL: kernels needing what the device failed the probe of left out, porter's own sub-groups
        switched on where they passed it)."""
        ...

    def checkers(self, device: Device) -> tuple[str, ...]:
        """The memory / race checkers that apply on `device` ("compute-sanitizer", "oclgrind")."""
        ...

    def contracting_flags(self, device: Device) -> tuple[str, ...]:
        """Compile flags (CompileOptions.flags) under which a build for `device`, which does not contract
        (:attr:`Device.contracts`), fuses a*b+c into FMAs as a contracting compiler does: how a kernel's
        sensitivity to contraction is measured where it runs; () when it cannot."""
        ...

    def checker_wrapper(
        self, device: Device, log_path: str, without: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        """The command a checker device's child runs under (empty: none), the options in `without` left
        out."""
        ...

    def checker_findings(self, device: Device, log: str) -> list[CheckerFinding]:
        """The findings of a checker device's log that reject a variant."""
        ...

    def checker_relief(self, device: Device, finding: CheckerFinding) -> str:
        """The checker option to run again without when `finding` is the checker itself stopping ("":
        none; the finding stands)."""
        ...

    def set_symbol(self, program: Any, name: str, value: np.ndarray | np.generic) -> None: ...

    def scrub_shared(self, device: Device) -> None:
        """Poison the shared memory a GPU keeps between launches (no-op where none is kept)."""
        ...

    def availability(self) -> Availability: ...

    def devices(self) -> list[Device]: ...

    def toolchain_id(self, device: Device | None = None, arch: str | None = None) -> str: ...

    def compile(
        self,
        source: str,
        entry: str,
        options: CompileOptions = CompileOptions(),
        device: Device | None = None,
    ) -> Binary: ...

    def load(self, binary: Binary, device: Device) -> Program: ...

    def alloc(self, nbytes: int, device: Device) -> Any: ...

    def to_device(self, array: np.ndarray, device: Device) -> Any: ...

    def to_host(self, buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray: ...

    def synchronize(self, device: Device) -> None: ...

    def flush_cache(self, device: Device) -> None:
        """Evict the device's last-level cache between timed runs (write a buffer larger than L2)."""
        ...

    def adopt(self, device: Device) -> None:
        """In a job's child process, before anything else of the job: `device` is as the parent found
        and probed it, so the child need not discover and probe every device again."""
        ...

    def other_users(self, device: Device) -> list[tuple[int, str]]:
        """(pid, name) of the processes the driver lists on `device` now, porter's own included (empty
        where the driver cannot say): what makes a timing contended (porter.harness.contention)."""
        ...

    def gpu_slots(self) -> list[GpuSlot]:
        """The GPUs of this backend's vendor that this process may use, each with the environment that
        gives a child process that GPU alone; read from the driver's tools, without opening a device."""
        ...


class BackendBase:
    """Defaults of the optional abilities of :class:`Backend` (none of them present)."""

    name: ClassVar[str]
    runs: ClassVar[tuple[str, ...]] = ()
    sets_symbols: ClassVar[bool] = False
    builds_without_device: ClassVar[bool] = True
    builds_from_early_threads: ClassVar[bool] = False
    poisons_undefined_lanes: ClassVar[bool] = False
    poison_lanes_flags: ClassVar[tuple[str, ...]] = ()
    watches_writes: ClassVar[bool] = False
    # The package its dialect.toml lives in (install hints, device_check_archs).
    package: ClassVar[str] = ""

    def install_hints(self) -> dict[str, str]:
        return dict(self.dialect.install_hints)  # type: ignore[attr-defined]

    def compile_archs(self) -> list[str]:
        return []

    def device_check_archs(self) -> list[str]:
        return list(self.dialect.device_check_archs)  # type: ignore[attr-defined]

    def missing_requirements(self, device: Device, requires: Sequence[str]) -> list[str]:
        return []

    def requirement_options(self, device: Device, requires: Sequence[str]) -> tuple[str, ...]:
        return ()

    def describe_requirements(self, requires: Sequence[str], device: Device | None = None) -> str:
        return ", ".join(requires)

    def probed_options(self, device: Device) -> tuple[str, ...]:
        return ()

    def checkers(self, device: Device) -> tuple[str, ...]:
        return ()

    def contracting_flags(self, device: Device) -> tuple[str, ...]:
        return ()

    def checker_wrapper(
        self, device: Device, log_path: str, without: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        return ()

    def checker_findings(self, device: Device, log: str) -> list[CheckerFinding]:
        return []

    def checker_relief(self, device: Device, finding: CheckerFinding) -> str:
        return ""

    def set_symbol(self, program: Any, name: str, value: np.ndarray | np.generic) -> None:
        raise LaunchError(f"backend {self.name} cannot set module globals (__constant__ symbols)")

    def scrub_shared(self, device: Device) -> None:
        return None

    def adopt(self, device: Device) -> None:
        return None

    def other_users(self, device: Device) -> list[tuple[int, str]]:
        return []

    def gpu_slots(self) -> list[GpuSlot]:
        return []

    def program_toolchains(self) -> tuple[Any, ...]:
        """The :class:`porter.backends.programs.ProgramToolchain` objects that build whole programs
        with this backend (none by default)."""
        return ()


# --------------------------------------------------------------------------- the registry
#
# Backends (what runs code) and dialects (the languages: what a translation is written in) are found
# here by name.  A target folder registers itself below; code elsewhere (or a test) adds one with
# :func:`register_backend` / :func:`register_dialect` and never edits porter/.

SOURCE_DIALECT = "cuda"  # the language porter's inputs (the originals) are written in

_IMPLEMENTATIONS: dict[str, str | Callable[[], Backend]] = {
    "cuda": "porter.backends.cuda:CudaBackend",
    "hip": "porter.backends.hip:HipBackend",
    "opencl": "porter.backends.opencl:OpenCLBackend",
    "cpu": "porter.backends.cpu:CpuBackend",
}
_DIALECTS: dict[str, str | Callable[[], Any]] = {
    "cuda": "porter.backends.cuda.dialect:CudaDialect",
    "hip": "porter.backends.hip.dialect:HipDialect",
    "opencl": "porter.backends.opencl.dialect:OpenCLDialect",
}
_LIVE: dict[tuple[str, str], Any] = {}


def _load(implementation: str | Callable[[], Any]) -> Any:
    if callable(implementation):
        return implementation()
    module, _, attr = implementation.partition(":")
    return getattr(importlib.import_module(module), attr)()


def register_backend(
    name: str, implementation: str | Callable[[], Backend], *, replace: bool = False
) -> None:
    """Make backend `name` known: ``"package.module:Class"`` (imported on first use) or a factory."""
    if name in _IMPLEMENTATIONS and not replace:
        raise ValueError(f"backend {name!r} is already registered")
    _IMPLEMENTATIONS[name] = implementation
    _LIVE.pop(("backend", name), None)


def register_dialect(name: str, implementation: str | Callable[[], Any], *, replace: bool = False) -> None:
    """Make dialect `name` known (a :class:`porter.backends.dialect.Dialect`), like :func:`register_backend`."""
    if name in _DIALECTS and not replace:
        raise ValueError(f"dialect {name!r} is already registered")
    _DIALECTS[name] = implementation
    _LIVE.pop(("dialect", name), None)


def unregister(name: str) -> None:
    """Forget backend and dialect `name` (tests that registered one)."""
    for table, kind in ((_IMPLEMENTATIONS, "backend"), (_DIALECTS, "dialect")):
        table.pop(name, None)
        _LIVE.pop((kind, name), None)


def backend_names() -> tuple[str, ...]:
    """Every registered backend, in registration order (the built-in ones first)."""
    return tuple(_IMPLEMENTATIONS)


def dialect_names() -> tuple[str, ...]:
    return tuple(_DIALECTS)


def _instance(kind: str, table: dict[str, Any], name: str) -> Any:
    """The live instance of `name` in `table` (imported on first use); KeyError names the choices."""
    if name not in table:
        raise KeyError(f"unknown {kind} {name!r}; choose from {', '.join(table)}")
    key = (kind, name)
    if key not in _LIVE:
        _LIVE[key] = _load(table[name])
    return _LIVE[key]


def get_backend(name: str) -> Backend:
    """The backend instance for `name` (imported on first use)."""
    backend: Backend = _instance("backend", _IMPLEMENTATIONS, name)
    return backend


def get_dialect(name: str) -> Dialect:
    """The :class:`porter.backends.dialect.Dialect` named `name`."""
    dialect: Dialect = _instance("dialect", _DIALECTS, name)
    return dialect


def runners(dialect: str) -> tuple[str, ...]:
    """The backends whose devices run code in `dialect`: those whose own dialect it is first, then the
    others that run it (the CPU emulator), in registration order."""
    found: list[tuple[int, str]] = []
    for name in backend_names():
        try:
            runs = tuple(get_backend(name).runs)
        except Exception:  # noqa: BLE001 - a backend that cannot be imported runs nothing here
            continue
        if dialect in runs:
            found.append((runs.index(dialect), name))
    return tuple(name for _, name in sorted(found, key=lambda f: f[0]))


def translation_targets() -> tuple[str, ...]:
    """The dialects porter translates the source dialect into, in registration order."""
    return tuple(n for n in dialect_names() if n != SOURCE_DIALECT and get_dialect(n).translates)


def fence_labels() -> frozenset[str]:
    """Every label a model's code block may carry, whatever dialect it was asked for: those of every
    dialect (:meth:`porter.backends.dialect.Dialect.fence_labels`)."""
    return frozenset(label for name in dialect_names() for label in get_dialect(name).fence_labels())


def runtime_prefixes() -> tuple[str, ...]:
    """How the host API calls of every dialect's runtime begin (``cuda``, ``hip``, ``cl``...), each once:
    a model's code block calling one of them is host code, whatever dialect it was asked for."""
    found = (prefix for name in dialect_names() for prefix in get_dialect(name).runtime_prefixes())
    return tuple(dict.fromkeys(found))


def install_hints(name: str) -> dict[str, str]:
    """Backend `name`'s install hints (``compile`` / ``run``), read from its folder's dialect.toml
    without importing it (a backend that cannot be imported still says what to install)."""
    implementation = _IMPLEMENTATIONS.get(name)
    if implementation is None:
        return {}
    if callable(implementation):
        try:
            return dict(get_backend(name).install_hints())
        except Exception:  # noqa: BLE001 - a backend that cannot be made gives no hint
            return {}
    spec = importlib.util.find_spec(implementation.partition(":")[0])
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = os.path.join(folder, "dialect.toml")
        if os.path.isfile(path):
            from porter.backends.dialect import parse_facts

            with open(path, "rb") as f:
                return dict(parse_facts(tomllib.load(f), path).install_hints)
    return {}


def dialect_of_suffix(suffix: str) -> str | None:
    """The dialect whose files end in `suffix` (".cl" -> "opencl"), or None."""
    suffix = suffix.lower()
    return next((n for n in dialect_names() if suffix in get_dialect(n).suffixes), None)


def dialect_of_text(suffix: str, text: str) -> str | None:
    """The dialect of a file: the one whose runtime header it includes (a HIP port keeps the CUDA
    file's ``.cu``/``.cuh`` name but includes ``hip/hip_runtime.h``), else its suffix's."""
    import re

    for name in dialect_names():
        facts = get_dialect(name).facts
        header = facts.header if facts is not None else None
        if header and re.search(rf'^\s*#\s*include\s*[<"]{re.escape(header)}[>"]', text, re.M):
            return name
    return dialect_of_suffix(suffix)


def load_data(package: str, filename: str) -> dict[str, Any]:
    """A TOML data file shipped inside a backend package (dialects, mapping tables, facts)."""
    return tomllib.loads(resources.files(package).joinpath(filename).read_text(encoding="utf-8"))
