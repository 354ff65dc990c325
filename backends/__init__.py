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
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

BACKEND_NAMES: tuple[str, ...] = ("cuda", "hip", "opencl", "cpu")

_IMPLEMENTATIONS: dict[str, str] = {
    "cuda": "porter.backends.cuda:CudaBackend",
    "hip": "porter.backends.hip:HipBackend",
    "opencl": "porter.backends.opencl:OpenCLBackend",
    "cpu": "porter.backends.cpu:CpuBackend",
}


@dataclass(frozen=True)
class HardwareFacts:
    warp_size: int
    max_threads_per_block: int
    shared_mem_per_block: int  # bytes
    multiprocessors: int | None = None
    subgroups: bool = False  # OpenCL: cl_khr_subgroups / intel subgroups available


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

    @property
    def label(self) -> str:
        """Stable, human-readable id used in verdicts and reports: backend:name[index]."""
        return f"{self.backend}:{self.name}" + (f"#{self.index}" if self.index else "")


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


def number_source(source: str) -> str:
    """The source with right-aligned line numbers, as compile errors show it."""
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))


class BackendError(Exception):
    """Base of the errors a backend raises (inside the harness they become Verdicts)."""


class CompileError(BackendError):
    def __init__(self, backend: str, log: str, source: str, options: Sequence[str] = (), entry: str = ""):
        self.backend = backend
        self.log = log
        self.source = source
        self.options = tuple(options)
        self.entry = entry
        super().__init__(self.render())

    def render(self) -> str:
        opts = " ".join(self.options)
        return (
            f"{self.backend}: compile of {self.entry or 'source'} failed (options: {opts or '-'})\n"
            f"{self.log.rstrip()}\n--- source ---\n{number_source(self.source)}"
        )


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


class Backend(Protocol):
    name: ClassVar[str]

    @property
    def dialect(self) -> dict[str, Any]: ...

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


def get_backend(name: str) -> Backend:
    """The backend instance for `name` (imported on first use)."""
    if name not in _IMPLEMENTATIONS:
        raise KeyError(f"unknown backend {name!r}; choose from {', '.join(BACKEND_NAMES)}")
    return _instance(name)


@cache
def _instance(name: str) -> Backend:
    module, _, cls = _IMPLEMENTATIONS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


def load_data(package: str, filename: str) -> dict[str, Any]:
    """A TOML data file shipped inside a backend package (dialects, mapping tables, facts)."""
    return tomllib.loads(resources.files(package).joinpath(filename).read_text(encoding="utf-8"))
