"""The OpenCL backend: pyopencl over every ICD present, plus Oclgrind as a checking device.

Devices are whatever the installed ICDs offer (NVIDIA's OpenCL, PoCL or Intel's CPU runtime,
AMD/Intel GPUs), each kept only when a probe kernel builds and runs correctly on it.  See
:mod:`.devices` for enumeration and :mod:`.oclgrind` for the checker.

Launch conventions (``Program(*args, grid, block, shared_bytes, timed)``):

* global work size = ``grid[i] * block[i]`` per dimension, local work size = ``block``;
* array arguments are the ``cl.Buffer`` objects of :meth:`OpenCLBackend.alloc` /
  :meth:`OpenCLBackend.to_device`; scalars must be NumPy scalars (``np.int32(n)``,
  ``np.float32(a)``, ``np.float64(a)``): their dtype is the C type passed;
* a :class:`porter.backends.isolate.LocalBuffer` becomes a ``__local`` argument of that many
  bytes.  OpenCL has no launch-time dynamic local memory, so ``shared_bytes`` is ignored:
  a translated ``extern __shared__`` array arrives as a LocalBuffer argument instead;
* ``timed=True`` waits for the launch and returns its device time in milliseconds, from the
  event's profiling counters; otherwise the launch is asynchronous and returns None.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from porter.backends import (
    Availability,
    BackendBase,
    Binary,
    CheckerFinding,
    CompileError,
    CompileOptions,
    Device,
    LaunchError,
    Program,
    ToolchainMissing,
    guards,
    identifiers,
)
from porter.backends.dialect import DialectFacts, load_facts
from porter.backends.isolate import LocalBuffer

from porter.files import decode_text, printable

from . import requirements
from .devices import (
    Live,
    adopt,
    build_quietly,
    capabilities,
    icd_registration,
    inventory,
    listed_devices,
    live,
    opened,
    pyopencl,
)
from .oclgrind import oclgrind_wrapper, parse_oclgrind_log, plugin_option

__all__ = [
    "OpenCLBackend",
    "OpenCLProgram",
    "build_options",
    "device_supports",
    "icd_registration",
    "missing_requirements",
    "oclgrind_wrapper",
    "parse_oclgrind_log",
    "requirement_options",
]

FORMAT_BINARY = "opencl-binary"
FORMAT_SOURCE = "opencl-source"
_MIN_FLUSH_BYTES = 8 << 20
_NO_OPTIONS = CompileOptions()


@functools.cache
def _dialect() -> DialectFacts:
    return load_facts("porter.backends.opencl")


def build_options(options: CompileOptions) -> list[str]:
    """OpenCL C build options for `options` (-D, -I, -cl-opt-disable for debug or dialect.toml's
    ``build_options``, then flags)."""
    out = [f"-D{d}" for d in options.defines]
    out += [f"-I{path}" for path in options.include_dirs]
    if options.debug:
        out.append("-cl-opt-disable")
    else:
        out += _dialect().build_options
    out += list(options.flags)
    return out


def device_supports(device: Device, requirement: str) -> bool:
    """Whether `device` meets one of a translated kernel's ``requires`` (``"subgroups"``,
    ``"subgroup_shuffle_relative"``, ``"reqd_sub_group_size_32"`` ...; see dialect.toml)."""
    return requirements.supports(capabilities(device), requirement)


def missing_requirements(device: Device, requires: Sequence[str]) -> list[str]:
    """The requirements of `requires` (and those they need) that `device` does not meet."""
    return requirements.missing(capabilities(device), requires)


def requirement_options(device: Device, requires: Sequence[str]) -> tuple[str, ...]:
    """Build options a kernel with `requires` needs on `device` (e.g. ``("-cl-std=CL3.0",)``)."""
    return requirements.build_options(capabilities(device), requires)


def _message(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


class OpenCLProgram:
    """A built kernel on one device, callable as the contract's :class:`~porter.backends.Program`."""

    def __init__(self, entry: Live, kernel: Any, name: str):
        self._live = entry
        self._kernel = kernel
        self.name = name
        cl = pyopencl()
        assert cl is not None
        self.num_args = int(kernel.get_info(cl.kernel_info.NUM_ARGS))

    def _set_args(self, cl: Any, args: Sequence[Any]) -> None:
        # Arguments stick to a kernel object between launches: a short list must not reuse old ones.
        if len(args) != self.num_args:
            raise LaunchError(f"{self.name}: takes {self.num_args} arguments, {len(args)} given")
        for i, value in enumerate(args):
            if isinstance(value, LocalBuffer):
                value = cl.LocalMemory(max(int(value.nbytes), 1))
            elif isinstance(value, SvmBuffer):  # an array other arguments point into: its SVM pointer
                value = cl.SVM(value.memory)
            elif isinstance(value, np.generic) or value is None:  # None: a NULL cl_mem, a null pointer
                pass
            elif isinstance(value, np.ndarray):
                raise LaunchError(
                    f"{self.name}: argument {i} is a NumPy array; copy it with to_device() first"
                )
            elif isinstance(value, bool | int | float):
                raise LaunchError(
                    f"{self.name}: argument {i} is a Python {type(value).__name__}; pass a NumPy scalar "
                    "(np.int32, np.float32, ...) so its C type is explicit"
                )
            try:
                self._kernel.set_arg(i, value)
            except cl.Error as err:
                raise LaunchError(f"{self.name}: argument {i}: {_message(err)}") from err

    def __call__(
        self,
        *args: Any,
        grid: Sequence[int],
        block: Sequence[int],
        shared_bytes: int = 0,
        timed: bool = False,
    ) -> float | None:
        cl = pyopencl()
        assert cl is not None  # a program exists only where pyopencl does
        dims = max(len(grid), len(block))
        if not 1 <= dims <= 3:
            raise LaunchError(f"{self.name}: grid and block need 1 to 3 dimensions, got {grid} and {block}")
        grid_n = [int(g) for g in grid] + [1] * (dims - len(grid))
        block_n = [int(b) for b in block] + [1] * (dims - len(block))
        if min(grid_n + block_n) < 1:
            raise LaunchError(f"{self.name}: grid {tuple(grid)} and block {tuple(block)} must be positive")
        self._set_args(cl, args)
        queue = self._live.ensure_queue()
        global_size = tuple(g * b for g, b in zip(grid_n, block_n, strict=True))
        try:
            event = cl.enqueue_nd_range_kernel(queue, self._kernel, global_size, tuple(block_n))
            if not timed:
                return None
            event.wait()
            return (int(event.profile.end) - int(event.profile.start)) * 1e-6
        except cl.Error as err:
            raise LaunchError(
                f"{self.name}: launch with global {global_size}, local {tuple(block_n)} failed: {_message(err)}"
            ) from err


def _installed_key() -> str:
    """What the default device's toolchain depends on that porter can see without an OpenCL call: every
    ICD entry the loader reads (porter's own registration included) and the files of the libraries
    they name (real path, size, modification time), the loader's variables and pyopencl's version."""
    import hashlib
    import json
    from importlib import metadata

    from porter.backends.opencl import icd

    parts: list[object] = [
        os.environ.get(v, "") for v in ("OCL_ICD_VENDORS", "OCL_ICD_FILENAMES", "POCL_DEVICES")
    ]
    for _name, library in icd.existing_entries():
        path = Path(library) if os.path.isabs(library) else None
        try:
            st = os.stat(os.path.realpath(path)) if path is not None else None
        except OSError:
            st = None
        parts.append([library, st.st_size if st else None, st.st_mtime_ns if st else None])
    runtime = icd.find_intel_cpu_runtime()
    if runtime is not None:
        try:
            parts.append([str(runtime), os.stat(runtime).st_mtime_ns])
        except OSError:
            parts.append(str(runtime))
    try:
        parts.append(metadata.version("pyopencl"))
    except metadata.PackageNotFoundError:
        parts.append(None)
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _default_toolchain_id(backend: OpenCLBackend) -> str:
    """The default device's toolchain id, remembered on disk under the cache root by what is installed
    (:func:`_installed_key`): enumerating the platforms (0.3-0.7 s) is paid once, not by every command
    that only needs the id (a re-run whose build verdicts are kept)."""
    from porter.cache import Cache

    cache = Cache()  # signed (an id is part of every cache key): an edited one is never believed
    key = Cache.key("opencl-default", _installed_key())
    saved = cache.get("tools", key)
    if saved is not None:
        return saved.decode("utf-8", "replace")
    found = backend._device_toolchain_id(None)
    if found:
        cache.put("tools", key, found.encode("utf-8"))
    return found


class OpenCLBackend(BackendBase):
    """pyopencl over every ICD present; Oclgrind (kind "checker") when installed."""

    name: ClassVar[str] = "opencl"
    runs: ClassVar[tuple[str, ...]] = ("opencl",)
    builds_from_early_threads: ClassVar[bool] = True  # PoCL links each kernel from a worker thread
    # the shuffles of a translation read the lanes CUDA leaves undefined through porter's helpers (cuda2opencl.toml
    # [warp_helpers.porter_undefined_lane]): 0, or the CPU runtime's poison pattern when built so
    poisons_undefined_lanes: ClassVar[bool] = True
    poison_lanes_flags: ClassVar[tuple[str, ...]] = ("-DPORTER_POISON_UNDEFINED_LANES",)

    @property
    def dialect(self) -> DialectFacts:
        return _dialect()

    # ------------------------------------------------------------------ discovery

    def availability(self) -> Availability:
        install = _dialect().install
        if pyopencl() is None:
            return Availability(
                name=self.name,
                compile=False,
                run=False,
                toolchain="",
                hint=f"{install['pyopencl']}; for a CPU device: {install['cpu_device']}",
            )
        devices = tuple(self.devices())
        runnable = [d for d in devices if d.kind != "checker" or live(d) is not None]
        inv = inventory()
        details = tuple(f"{d.label}: {d.platform}, {d.arch}, driver {d.driver}" for d in devices)
        details += tuple(f"rejected {why}" for why in inv.rejected)
        details += (inv.error,) if inv.error else ()
        hint = ""
        if not runnable:
            hint = f"no working OpenCL device; for a CPU device: {install['cpu_device']}"
        elif not any(d.kind == "checker" for d in devices):
            hint = f"for the checking device: {install['oclgrind']}"
        return Availability(
            name=self.name,
            compile=bool(runnable),
            run=bool(runnable),
            toolchain=self.toolchain_id(runnable[0]) if runnable else "",
            devices=devices,
            hint=hint,
            details=details,
        )

    def adopt(self, device: Device) -> None:
        """A job's child takes its device as the parent probed it (:func:`devices.adopt`)."""
        adopt(device)

    def devices(self) -> list[Device]:
        try:
            return listed_devices()
        except Exception:  # never raise from discovery
            return []

    def program_toolchains(self) -> tuple[Any, ...]:
        """One OpenCL program toolchain per device that runs kernels here (backends/opencl/program.py):
        an OpenCL port's host code built with porter's OpenCL runtime, run on that device."""
        from porter.backends.opencl.program import program_toolchains

        return program_toolchains(self.devices())

    def toolchain_id(self, device: Device | None = None, arch: str | None = None) -> str:
        if device is None:
            return _default_toolchain_id(self)
        return self._device_toolchain_id(device)

    def _device_toolchain_id(self, device: Device | None) -> str:
        if device is None:
            first = self._default_live()
            if first is None:
                return ""
            device = first.device
        entry = live(device)
        if entry is None or device.kind == "checker":
            # The checker's id must be the same inside and outside a process run under oclgrind.
            return f"opencl|{device.platform}|{device.name}|{device.driver}|{device.arch}"
        info = entry.info
        return "|".join(
            [
                "opencl",
                info["platform"],
                info["platform_version"],
                info["device"],
                info["driver"],
                info["opencl_c"],
            ]
        )

    # ------------------------------------------------------------------ requirements

    def missing_requirements(self, device: Device, requires: Sequence[str]) -> list[str]:
        """What of a translated kernel's ``requires`` `device` lacks (see :func:`device_supports`)."""
        return missing_requirements(device, requires)

    def requirement_options(self, device: Device, requires: Sequence[str]) -> tuple[str, ...]:
        """Build options for a kernel with ``requires`` on `device` (``-cl-std=CL3.0`` ...)."""
        return requirement_options(device, requires)

    def probed_options(self, device: Device) -> tuple[str, ...]:
        """What this process's probe of `device` makes of every build there (:func:`requirements.probed_defines`):
        the -D options a job's child, which takes the device unprobed, gets with the job's options.  On an H200 a
        translated shuffle reduction's replay was built without porter's sub-group define and came out without
        its kernel, where the program's own build ran it."""
        return requirements.probed_defines(capabilities(device))

    def describe_requirements(self, requires: Sequence[str], device: Device | None = None) -> str:
        """Human words for ``requires``, with the extensions that provide them; with `device`, those it
        declares but failed porter's probe of (:attr:`~requirements.Capabilities.broken`) say so."""
        return requirements.describe(requires, capabilities(device).broken if device is not None else ())

    # ------------------------------------------------------------------ the checker (Oclgrind)

    def checkers(self, device: Device) -> tuple[str, ...]:
        return ("oclgrind",) if device.kind == "checker" else ()

    def checker_wrapper(
        self, device: Device, log_path: str, without: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        """The checker device's runs happen in a child started under Oclgrind (its options in `without`
        left out)."""
        return tuple(oclgrind_wrapper(log_path, without=without)) if device.kind == "checker" else ()

    def checker_findings(self, device: Device, log: str) -> list[CheckerFinding]:
        """Oclgrind's out-of-bounds, uninitialised-read and data-race reports in `log`, and its own stops
        (kind ``simulator-error``: a plugin that cannot follow an instruction)."""
        if device.kind != "checker":
            return []
        return [
            CheckerFinding(f.kind, f.message, f.line, f.code, f.other_line, f.other_code, f.entities)
            for f in parse_oclgrind_log(log)
            if f.kind in ("simulator-error", "out-of-bounds", "uninitialized", "data-race")
        ]

    def checker_relief(self, device: Device, finding: CheckerFinding) -> str:
        """The option to run the checker without when `finding` is the simulator stopping in one of its
        plugins ("" otherwise)."""
        return plugin_option(finding.message) if finding.kind == "simulator-error" else ""

    def _default_live(self) -> Live | None:
        entries = inventory().live
        preferred = [e for e in entries if e.device.kind != "checker"]
        pool = preferred or entries
        return pool[0] if pool else None

    def _live(self, device: Device | None) -> Live:
        cl = pyopencl()
        install = _dialect().install
        if cl is None:
            raise ToolchainMissing(f"pyopencl is not installed: {install['pyopencl']}")
        entry = self._default_live() if device is None else live(device)
        if entry is not None:
            return entry
        if device is None:
            raise ToolchainMissing(
                f"no working OpenCL device to compile for; for a CPU device: {install['cpu_device']}"
            )
        if device.kind == "checker":
            raise ToolchainMissing(
                "the oclgrind checking device runs only in a child process started under oclgrind_wrapper()"
            )
        raise ToolchainMissing(
            f"OpenCL device {device.label} ({device.platform}) is not present in this process"
        )

    # ------------------------------------------------------------------ compile and load

    def compile(
        self,
        source: str,
        entry: str,
        options: CompileOptions = _NO_OPTIONS,
        device: Device | None = None,
    ) -> Binary:
        """Build OpenCL C for `device` (None: the first working device). Pure: launches nothing."""
        target = self._live(device)
        cl = pyopencl()
        assert cl is not None
        opts = build_options(options)
        # kernels needing what porter's probe found this device lacks (though it declares it) stay out; CUDA's
        # fast-math intrinsics are the native_ functions on the devices dialect.toml [facts.native_math] names
        opts += [o for o in requirements.device_defines(target.caps) if o not in opts]
        target.ensure_queue()
        program = cl._cl._Program(target.context, printable(source))
        try:
            build_quietly(program, " ".join(opts).encode(), target.cl_device)
        except cl.Error as err:
            log = _build_log(cl, program, target.cl_device) or _message(err)
            raise CompileError(self.name, log, source, opts, entry) from err
        log = _build_log(cl, program, target.cl_device)
        try:
            names = [n.strip() for n in str(program.get_info(cl.program_info.KERNEL_NAMES)).split(";")]
        except cl.Error:  # OpenCL 1.1 cannot list kernels; some runtimes refuse for an empty program
            try:
                cl.Kernel(program, identifiers.symbol(entry))
                names = [identifiers.symbol(entry)]
            except cl.Error:
                names = []
        symbol = identifiers.symbol(entry)  # k\u00e9rnel is the kernel kérnel
        if symbol not in names:
            log = f"{log}\nkernel {entry!r} not found; the program defines: {', '.join(n for n in names if n) or '-'}"
            raise CompileError(self.name, log.strip(), source, opts, entry)
        try:
            data = bytes(program.get_info(cl.program_info.BINARIES)[0])
        except (cl.Error, IndexError, TypeError):
            data = b""
        fmt = FORMAT_BINARY if data else FORMAT_SOURCE
        return Binary(
            backend=self.name,
            entry=symbol,
            arch=target.device.arch,
            format=fmt,
            data=data or source.encode("utf-8", "surrogateescape"),
            toolchain=self.toolchain_id(target.device),
            log=log,
            meta={"options": opts, "device": target.device.label, "source": source},
        )

    def load(self, binary: Binary, device: Device) -> Program:
        target = self._live(device)
        cl = pyopencl()
        assert cl is not None
        target.ensure_queue()
        opts = " ".join(binary.meta.get("options", ())).encode()
        try:
            # Oclgrind reports source lines only for programs it built from source.
            from_binary = binary.format == FORMAT_BINARY and binary.meta.get("device") == device.label
            if from_binary and not (device.kind == "checker" and binary.meta.get("source")):
                program = cl._cl._Program(target.context, [target.cl_device], [binary.data])
            else:
                source = binary.meta.get("source") or decode_text(binary.data)
                program = cl._cl._Program(target.context, printable(source))
            build_quietly(program, opts, target.cl_device)
            kernel = cl.Kernel(program, binary.entry)
        except cl.Error as err:
            raise LaunchError(f"loading {binary.entry} on {device.label} failed: {_message(err)}") from err
        return OpenCLProgram(target, kernel, binary.entry)

    # ------------------------------------------------------------------ memory

    def alloc(self, nbytes: int, device: Device) -> Any:
        if guards.armed() and device.kind == "cpu":
            return self._guarded(guards.host_bytes(nbytes), device)
        target = self._live(device)
        cl = pyopencl()
        assert cl is not None
        target.ensure_queue()
        try:
            return cl.Buffer(target.context, cl.mem_flags.READ_WRITE, max(int(nbytes), 1))
        except cl.Error as err:
            raise LaunchError(f"allocating {nbytes} bytes on {device.label} failed: {_message(err)}") from err

    def _guarded(self, memory: np.ndarray, device: Device) -> Any:
        """A buffer of a CPU device that uses `memory` itself (host memory inside guard zones, made by
        porter.backends.guards in a child's job), so a kernel's write past it faults there."""
        target = self._live(device)
        cl = pyopencl()
        assert cl is not None
        target.ensure_queue()
        try:
            flags = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
            return cl.Buffer(target.context, flags, hostbuf=memory)
        except cl.Error as err:
            raise LaunchError(
                f"allocating {memory.nbytes} bytes on {device.label} failed: {_message(err)}"
            ) from err

    def to_device(self, array: np.ndarray, device: Device) -> Any:
        host = np.ascontiguousarray(array)
        if guards.armed() and device.kind == "cpu":  # the data written into the guarded memory itself
            memory = guards.host_bytes(host.nbytes)
            memory[: host.nbytes] = host.reshape(-1).view(np.uint8)
            return self._guarded(memory, device)
        buffer = self.alloc(host.nbytes, device)
        if host.nbytes:
            cl = pyopencl()
            assert cl is not None
            try:
                cl.enqueue_copy(self._live(device).queue, buffer, host, is_blocking=True)
            except cl.Error as err:
                raise LaunchError(
                    f"copy of {host.nbytes} bytes to {device.label} failed: {_message(err)}"
                ) from err
        return buffer

    def views(self, array: np.ndarray, offsets: Sequence[int], device: Device) -> tuple[Any, list[Any]]:
        """`array` in one buffer, and a kernel argument `offset` bytes into it per offset (arguments
        that point into one allocation: a write through one is read through the other).

        Every offset a multiple of the device's base address alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN):
        sub-buffers of one buffer (any OpenCL device).  Otherwise a kernel argument can only point there
        through shared virtual memory (OpenCL 2.0): one SVM allocation and pointers into it -- the guarded
        host memory itself where the device takes any host pointer (fine-grained system SVM), a
        coarse-grained SVM buffer elsewhere.  A device with neither cannot run the launch as captured
        (ToolchainMissing: the job's stage "unavailable"); separate buffers over overlapping host
        memory would be undefined behaviour, and copies would break the aliasing the kernel relies on."""
        cl = pyopencl()
        assert cl is not None
        target = self._live(device)
        queue = target.ensure_queue()
        at = [int(o) for o in offsets]
        align = max(int(target.cl_device.mem_base_addr_align) // 8, 1)  # given in bits
        if all(o % align == 0 for o in at):
            base = self.to_device(array, device)
            size = int(base.size)
            try:
                return base, [base.get_sub_region(o, size - o) for o in at]
            except cl.Error as err:
                raise LaunchError(f"{device.label}: a sub-buffer at {at} bytes: {_message(err)}") from err
        try:
            svm = int(target.cl_device.svm_capabilities)
        except (cl.Error, AttributeError):  # an OpenCL 1.x device or runtime: no SVM
            svm = 0
        odd = next(o for o in at if o % align)
        if not svm & int(cl.device_svm_capabilities.COARSE_GRAIN_BUFFER):
            raise ToolchainMissing(
                f"{device.label} cannot pass a pointer {odd} bytes into a buffer: a sub-buffer must start at a "
                f"multiple of {align} bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN) and the device has no shared "
                "virtual memory"
            )
        host = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        try:
            if (
                svm & int(cl.device_svm_capabilities.FINE_GRAIN_SYSTEM)
                and guards.armed()
                and device.kind == "cpu"
            ):
                memory = guards.host_bytes(host.nbytes)  # inside guard zones, as every other buffer
                memory[: host.nbytes] = host
                shared = SvmBuffer(memory, queue, coarse=False)
            else:
                memory = cl.csvm_empty(
                    target.context, max(host.nbytes, 1), np.uint8, alignment=align, queue=queue
                )
                shared = SvmBuffer(memory, queue, coarse=True)
                if host.nbytes:
                    cl.enqueue_copy(queue, cl.SVM(memory), host, is_blocking=True)
            return shared, [cl.SVM(memory[o:]) for o in at]
        except cl.Error as err:
            raise LaunchError(
                f"{device.label}: shared virtual memory of {host.nbytes} bytes: {_message(err)}"
            ) from err

    def to_host(self, buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        cl = pyopencl()
        assert cl is not None
        out = np.empty(tuple(int(s) for s in shape), dtype=np.dtype(dtype))
        if out.nbytes == 0:
            return out
        if out.nbytes > int(buffer.size):
            raise LaunchError(f"to_host: {out.nbytes} bytes asked from a buffer of {buffer.size}")
        if isinstance(buffer, SvmBuffer):
            return buffer.read(out)
        queue = _queue_of(buffer)
        try:
            cl.enqueue_copy(queue, out, buffer, is_blocking=True)
        except cl.Error as err:
            raise LaunchError(f"copy of {out.nbytes} bytes to the host failed: {_message(err)}") from err
        return out

    def synchronize(self, device: Device) -> None:
        cl = pyopencl()
        assert cl is not None
        try:
            self._live(device).ensure_queue().finish()
        except cl.Error as err:
            raise LaunchError(f"{device.label}: {_message(err)}") from err

    def flush_cache(self, device: Device) -> None:
        """Overwrite a scratch buffer twice the device's global memory cache (at least 8 MiB)."""
        target = self._live(device)
        cl = pyopencl()
        assert cl is not None
        queue = target.ensure_queue()
        if target.scratch is None:
            cache = int(target.cl_device.global_mem_cache_size)
            size = min(max(2 * cache, _MIN_FLUSH_BYTES), int(target.cl_device.max_mem_alloc_size))
            target.scratch = self.alloc(size - size % 4, device)
        try:
            cl.enqueue_fill_buffer(queue, target.scratch, np.uint32(0x5EED), 0, int(target.scratch.size))
        except cl.Error as err:
            raise LaunchError(f"{device.label}: cache flush failed: {_message(err)}") from err


class SvmBuffer:
    """Shared virtual memory holding an array that other kernel arguments point into (OpenCLBackend.views):
    the allocation's bytes (a coarse-grained SVM array, or host memory a fine-grained-system device
    reads directly) and the queue its kernels run on."""

    def __init__(self, memory: np.ndarray, queue: Any, coarse: bool):
        self.memory, self.queue, self.coarse = memory, queue, coarse

    @property
    def size(self) -> int:
        return int(self.memory.nbytes)

    def read(self, out: np.ndarray) -> np.ndarray:
        """`out` filled from the start of the memory, once the queue's kernels are done."""
        cl = pyopencl()
        assert cl is not None
        flat = out.reshape(-1).view(np.uint8)
        try:
            self.queue.finish()
            if self.coarse:
                cl.enqueue_copy(self.queue, flat, cl.SVM(self.memory[: flat.nbytes]), is_blocking=True)
            else:
                flat[:] = self.memory[: flat.nbytes]
        except cl.Error as err:
            raise LaunchError(
                f"copy of {flat.nbytes} bytes of shared virtual memory failed: {_message(err)}"
            ) from err
        return out


def _build_log(cl: Any, program: Any, cl_device: Any) -> str:
    try:
        return str(program.get_build_info(cl_device, cl.program_build_info.LOG)).strip()
    except cl.Error:
        return ""


def _queue_of(buffer: Any) -> Any:
    """The queue of the device whose context owns `buffer`."""
    context = buffer.context
    for entry in opened():
        if entry.context is not None and entry.context == context:
            return entry.queue
    raise LaunchError("to_host: the buffer does not belong to an OpenCL device opened by porter")
