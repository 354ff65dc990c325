"""The cuda backend: NVRTC (pip, no GPU needed) or nvcc to cubin/PTX; CuPy to run on NVIDIA GPUs.

Compiling: ``compile(source, entry, CompileOptions(arch="sm_90", output="cubin"|"ptx"))``.  The
entry may carry template arguments (``axpby<float>``); Binary.entry is the lowered symbol.
NVRTC is used when it loads, nvcc otherwise; ``compiler="nvcc"`` (keyword) or the pseudo-flag
``compiler=nvcc`` in CompileOptions.flags (consumed here, never passed on) picks nvcc.  Cubins
come with ptxas's register/shared/spill/stack report (Binary.report); PTX runs no ptxas unless
``report=True``.  Headers: see :mod:`porter.backends.cuda.toolchain`.

Running: CuPy; see :mod:`porter.backends.cuda.cupy_runtime`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from porter.backends import (
    Availability,
    BackendBase,
    Binary,
    CompileError,
    CompileOptions,
    Device,
    GpuSlot,
    LaunchError,
    Program,
    ToolchainMissing,
    identifiers,
)
from porter.backends.cuda import cupy_runtime, nvcc, nvrtc, ptxas, toolchain
from porter.backends.dialect import DialectFacts, load_facts

DEFAULT_OPTIONS = CompileOptions()
COMPILER_FLAG = "compiler="


# NVRTC's words for a source that needs a host toolchain's headers
_NEEDS_HOST_HEADERS = re.compile(r"cannot open source file|is not allowed in JIT mode")


def split_compiler_flag(flags: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """('compiler=nvcc', '-O3') -> ('nvcc', ('-O3',))."""
    chosen = None
    rest = []
    for flag in flags:
        if flag.startswith(COMPILER_FLAG):
            chosen = flag[len(COMPILER_FLAG) :]
        else:
            rest.append(flag)
    return chosen, tuple(rest)


class CudaBackend(BackendBase):
    name: ClassVar[str] = "cuda"
    runs: ClassVar[tuple[str, ...]] = ("cuda",)
    sets_symbols: ClassVar[bool] = True

    def other_users(self, device: Device) -> list[tuple[int, str]]:
        from porter.backends.cuda.smi import bus_id, compute_apps

        return compute_apps(bus_id(device.uid) or device.index)

    def gpu_slots(self) -> list[GpuSlot]:
        from porter.backends.cuda.smi import gpu_slots

        return gpu_slots()

    @property
    def dialect(self) -> DialectFacts:
        return load_facts("porter.backends.cuda")

    # ------------------------------------------------------------------ discovery

    def compilers(self) -> list[str]:
        """Available compilers, preferred first: 'nvrtc', 'nvcc'."""
        found = []
        if toolchain.nvrtc_version():
            found.append("nvrtc")
        if toolchain.nvcc_path() and toolchain.nvcc_version():
            found.append("nvcc")
        return found

    def devices(self) -> list[Device]:
        return list(cupy_runtime.list_devices("cuda", "cuda"))

    def availability(self) -> Availability:
        hints = toolchain.facts()["hints"]
        compilers = self.compilers()
        devices = tuple(self.devices())
        details = []
        if toolchain.nvrtc_version():
            details.append(f"nvrtc {toolchain.nvrtc_version()}")
        if "nvcc" in compilers:
            details.append(f"nvcc {toolchain.nvcc_version()} at {toolchain.nvcc_path()}")
        headers = toolchain.toolkit_include_dirs()
        details.append(f"CUDA headers: {headers[0] if headers else 'not found (only porter C-header shims)'}")
        hint = ""
        if not compilers:
            hint = hints["compile"]
        elif not devices:
            hint = hints["run_cupy"] if cupy_runtime.cupy_module() is None else hints["run_gpu"]
        return Availability(
            name=self.name,
            compile=bool(compilers),
            run=bool(devices),
            toolchain=self.toolchain_id() if compilers else "",
            devices=devices,
            hint=hint,
            details=tuple(details),
        )

    def default_arch(self, device: Device | None = None, options: CompileOptions | None = None) -> str:
        if options is not None and options.arch:
            return options.arch
        if device is not None and device.arch.startswith("sm_"):
            return device.arch
        return str(toolchain.facts()["default_arch"])

    def _compiler(self, requested: str | None) -> str:
        available = self.compilers()
        if requested:
            if requested not in ("nvrtc", "nvcc"):
                raise ToolchainMissing(f"cuda: unknown compiler {requested!r}; choose nvrtc or nvcc")
            if requested not in available:
                raise ToolchainMissing(
                    f"cuda: {requested} not found; {toolchain.facts()['hints']['compile']}"
                )
            return requested
        if not available:
            raise ToolchainMissing(f"cuda: no CUDA compiler; {toolchain.facts()['hints']['compile']}")
        return available[0]

    def toolchain_id(
        self, device: Device | None = None, arch: str | None = None, *, compiler: str | None = None
    ) -> str:
        """'nvrtc-13.5|sm_90|driver-13.0' (driver 'none' without a GPU); part of every cache key."""
        arch = arch or self.default_arch(device)
        available = self.compilers()
        chosen = compiler or (available[0] if available else "none")
        version = {"nvrtc": toolchain.nvrtc_version(), "nvcc": toolchain.nvcc_version()}.get(chosen) or "none"
        driver = device.driver if device is not None and device.driver else self._driver()
        return f"{chosen}-{version}|{arch}|driver-{driver}"

    def program_toolchains(self) -> tuple[Any, ...]:
        """nvcc building a whole CUDA program (the original), run on the first NVIDIA GPU here; its
        build is instrumented so a run can record its launches (porter_capture_cuda.h)."""
        from porter.backends.programs import DriverToolchain

        devices = self.devices()
        device = devices[0] if devices else None
        arch = self.default_arch(device)
        nvcc = toolchain.nvcc_path() if toolchain.nvcc_version() else None
        return (
            DriverToolchain(
                "nvcc", self.name, "cuda", nvcc, f"nvcc {toolchain.nvcc_version() or '?'} {arch}",
                missing=toolchain.facts()["hints"]["compile"], flags=("-O2", f"-arch={arch}"),
                device_flags=("-x", "cu"), find_device=lambda: device, command_vars=("NVCC",),
                capture_header=Path(__file__).parent / "porter_capture_cuda.h",
                capture_headers=(Path(__file__).parent / toolchain.LEGACY_HEADER,),
            ),
        )  # fmt: skip

    def _driver(self) -> str:
        devices = cupy_runtime.list_devices("cuda", "cuda")
        return devices[0].driver if devices else "none"

    # ------------------------------------------------------------------ compile

    def compile(
        self,
        source: str,
        entry: str,
        options: CompileOptions = DEFAULT_OPTIONS,
        device: Device | None = None,
        *,
        compiler: str | None = None,
        report: bool | None = None,
        extra_include_dirs: Sequence[str] = (),
        backend_name: str | None = None,
        toolchain_suffix: str = "",
    ) -> Binary:
        """Compile device-only CUDA to a cubin (default) or PTX.

        Extra keywords: `compiler` ("nvrtc" | "nvcc"), `report` (run ptxas -v; default: for
        cubins only), `extra_include_dirs` (searched after options.include_dirs, before the
        toolkit), `backend_name`/`toolchain_suffix` (used by the hip backend's hip-on-cuda).
        """
        if not identifiers.is_ascii(entry):
            hint = str(toolchain.facts()["hints"]["unicode_name"]).format(entry=entry)
            raise CompileError(backend_name or self.name, hint, source, (), entry, summary=hint)
        flag_compiler, flags = split_compiler_flag(options.flags)
        chosen = self._compiler(compiler or flag_compiler)
        arch = self.default_arch(device, options)
        output = options.output or str(toolchain.facts()["default_output"])
        if output not in toolchain.facts()["outputs"]:
            raise CompileError(
                backend_name or self.name, f"unknown output {output!r} (cubin or ptx)", source, (), entry
            )
        want_report = (output == "cubin") if report is None else report
        includes = (*options.include_dirs, *extra_include_dirs)

        def attempt(chosen: str) -> tuple[Any, list[str]]:
            defines = tuple(options.defines)
            if chosen == "nvrtc":
                include_dirs = toolchain.nvrtc_include_dirs(includes)
                build, make_options = nvrtc.compile_source, nvrtc.nvrtc_options
                if backend_name is None:  # CUDA source: the version nvcc's implicit cuda_runtime.h defines
                    defines = (*defines, *_runtime_version_define(defines))
            else:
                include_dirs = includes  # nvcc brings its toolkit's headers and a host C library
                build, make_options = nvcc.compile_source, nvcc.nvcc_options
            # CUDA built by nvcc (a unit with host code): what CUDA 13 removed that older programs use, restored
            legacy = (
                ("-include", toolchain.legacy_header()) if chosen == "nvcc" and backend_name is None else ()
            )
            cmd = make_options(
                arch, output, include_dirs=include_dirs, defines=defines, flags=(*legacy, *flags),
                debug=options.debug, report=want_report,
            )  # fmt: skip
            return build(source, entry, cmd, output, backend=backend_name or self.name), cmd

        try:
            compiled, cmd = attempt(chosen)
        except CompileError as err:
            # a real program's kernel file includes host headers (<fstream>, helper_functions.h, the
            # profiler API) that NVRTC cannot open: nvcc, whose host compiler has them, builds its device
            # code -- unless a compiler was asked for
            if chosen != "nvrtc" or compiler or flag_compiler or "nvcc" not in self.compilers():
                raise
            if not _NEEDS_HOST_HEADERS.search(err.log):  # the compiler's words, not the user's source
                raise
            chosen = "nvcc"
            compiled, cmd = attempt(chosen)
        report_data = ptxas.parse_report(compiled.log, compiled.entry) if want_report else None
        return Binary(
            backend=backend_name or self.name,
            entry=compiled.entry,
            arch=arch,
            format=output,
            data=compiled.data,
            toolchain=self.toolchain_id(device, arch, compiler=chosen) + toolchain_suffix,
            log=compiled.log,
            report=report_data,
            meta={"compiler": chosen, "options": tuple(cmd), "name_expression": entry},
        )

    # ------------------------------------------------------------------ run

    def _index(self, device: Device) -> int:
        return device.index

    def load(self, binary: Binary, device: Device) -> Program:
        if binary.format not in ("cubin", "ptx"):
            raise ToolchainMissing(f"cuda: cannot load a {binary.format!r} binary on {device.label}")
        return cupy_runtime.CupyProgram(binary, device)

    def set_symbol(self, program: Program, name: str, value: np.ndarray | np.generic) -> None:
        """cudaMemcpyToSymbol on a loaded program (CuPy module get_global + copy)."""
        if not isinstance(program, cupy_runtime.CupyProgram):
            raise LaunchError(f"cuda: cannot set symbols of a {type(program).__name__}")
        program.set_symbol(name, value)

    def alloc(self, nbytes: int, device: Device) -> Any:
        return cupy_runtime.alloc(nbytes, self._index(device))

    def to_device(self, array: np.ndarray, device: Device) -> Any:
        return cupy_runtime.to_device(array, self._index(device))

    def to_host(self, buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        return cupy_runtime.to_host(buffer, dtype, shape)

    def synchronize(self, device: Device) -> None:
        cupy_runtime.synchronize(self._index(device))

    def flush_cache(self, device: Device) -> None:
        cupy_runtime.flush_cache(self._index(device))

    def scrub_shared(self, device: Device) -> None:
        """Poison every SM's shared memory (0xFF bytes) so reads of slots a kernel never wrote show."""
        cupy_runtime.scrub_shared(self._index(device))

    def checkers(self, device: Device) -> tuple[str, ...]:
        """compute-sanitizer (memcheck, racecheck) on NVIDIA GPUs: :mod:`.sanitizer`."""
        return ("compute-sanitizer",) if device.kind == "gpu" else ()


def _runtime_version_define(defines: Sequence[str]) -> tuple[str, ...]:
    """``CUDART_VERSION=13000`` for NVRTC (13.0), which includes no cuda_runtime.h: device code that tests
    it (Rodinia cfd's ``#if CUDART_VERSION < 3000`` struct double3) builds as under nvcc; () when the
    caller defines it or NVRTC's version is unknown."""
    if any(d.split("=", 1)[0] == "CUDART_VERSION" for d in defines):
        return ()
    version = toolchain.nvrtc_version()
    if not version:
        return ()
    major, _, minor = version.partition(".")
    return (f"CUDART_VERSION={int(major) * 1000 + int(minor or 0) * 10}",)
