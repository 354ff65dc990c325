"""The hip backend: HIP device code for AMD GPUs (hipcc / clang -> hsaco) and for NVIDIA GPUs.

Targets:

* AMD (arch ``gfx...``): compiled by :mod:`porter.backends.hip.amd` (hipcc for the archs it
  reaches, clang-19 for gfx942), run through hip-python when an AMD GPU is present.
* NVIDIA (arch ``sm_...``, platform "hip-on-cuda"): the HIP source is compiled by the cuda
  backend (NVRTC, or nvcc) with porter's own HIP-on-CUDA header
  (``include/hip/hip_runtime.h``, force-included) and loaded/run through the cuda backend's CuPy
  machinery, so HIP variants execute wherever an NVIDIA GPU exists.

The compiler is chosen from the target; ``compiler="hipcc"|"clang"|"nvrtc"|"nvcc"`` (keyword or
the pseudo-flag ``compiler=...`` in CompileOptions.flags) overrides it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
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
    HardwareFacts,
    LaunchError,
    Program,
    ToolchainMissing,
)
from porter.backends.cuda import CudaBackend, cupy_runtime, split_compiler_flag
from porter.backends.dialect import DialectFacts, load_facts
from porter.backends.hip import amd, amd_runtime

DEFAULT_OPTIONS = CompileOptions()
HIP_ON_CUDA = "hip-on-cuda"


def include_dir() -> str:
    """The directory holding porter's hip/hip_runtime.h for NVIDIA targets."""
    return str(resources.files("porter.backends.hip").joinpath("include"))


def amd_include_dir() -> str:
    """The directory of porter's fallbacks for AMD builds against an older HIP (hip/hip_math_constants.h,
    hip/hip_bf16.h: each defers to the installed HIP's own where it has one)."""
    return str(resources.files("porter.backends.hip").joinpath("include_amd"))


@cache
def header_digest() -> str:
    """Short hash of the HIP-on-CUDA headers (part of the hip-on-cuda toolchain id)."""
    digest = hashlib.sha256()
    folder = resources.files("porter.backends.hip").joinpath("include").joinpath("hip")
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".h"):
            digest.update(item.name.encode() + item.read_bytes())
    return digest.hexdigest()[:12]


def _prelude(source: str) -> str:
    """Force-include hip/hip_runtime.h (ours on NVIDIA, ROCm's on AMD), keeping the user's line numbers."""
    return f'#include <hip/hip_runtime.h>\n#line 1 "kernel.hip"\n{source}'


def is_nvidia_target(arch: str) -> bool:
    return arch.startswith(("sm_", "compute_"))


class HipBackend(BackendBase):
    name: ClassVar[str] = "hip"
    runs: ClassVar[tuple[str, ...]] = ("hip",)
    sets_symbols: ClassVar[bool] = True  # on NVIDIA GPUs (hip-on-cuda) only

    def other_users(self, device: Device) -> list[tuple[int, str]]:
        if device.platform != HIP_ON_CUDA:  # AMD's rocm-smi is not read yet: nothing claimed
            return []
        from porter.backends.cuda.smi import compute_apps

        return compute_apps(device.index)

    def __init__(self) -> None:
        self._cuda = CudaBackend()

    @property
    def dialect(self) -> DialectFacts:
        return load_facts("porter.backends.hip")

    def program_toolchains(self) -> tuple[Any, ...]:
        """A whole HIP program built two ways: nvcc through porter's HIP-on-CUDA headers (run on the first
        NVIDIA GPU here), and hipcc for the AMD arch of the first AMD GPU (else the first arch of
        dialect.toml's ``compile_archs`` hipcc reaches: built, not run, without an AMD GPU).  Both can
        build a HIP program so its runs record their launches (`porter capture`): through CUDA's capture
        header under nvcc, through porter_capture_hip.h under hipcc."""
        from porter.backends.cuda import toolchain as cuda_toolchain
        from porter.backends.hip.names import NAMES_HEADER, hip_names_header
        from porter.backends.programs import DriverToolchain

        def names(out: Path) -> list[str]:
            folder = out / "porter-include"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / NAMES_HEADER).write_text(hip_names_header(), encoding="utf-8")
            return [str(folder)]

        devices = self.devices()
        nvidia = next((d for d in devices if d.platform == HIP_ON_CUDA), None)
        gpu = next((d for d in devices if d.platform != HIP_ON_CUDA), None)
        sm = nvidia.arch if nvidia is not None else str(cuda_toolchain.facts()["default_arch"])
        nvcc = cuda_toolchain.nvcc_path() if cuda_toolchain.nvcc_version() else None
        chains: list[Any] = [
            DriverToolchain(
                "hip-on-cuda", self.name, "hip", nvcc, f"nvcc {cuda_toolchain.nvcc_version() or '?'} {sm} + porter HIP-on-CUDA",
                missing=cuda_toolchain.facts()["hints"]["compile"], flags=("-O2", f"-arch={sm}"),
                device_flags=("-x", "cu"), all_device=True, include_dirs=(include_dir(),), prepare=names,
                find_device=lambda: nvidia,
                # nvcc underneath: a HIP program's capturing build is CUDA's (porter's HIP headers map it)
                capture_header=Path(cuda_toolchain.__file__).parent / "porter_capture_cuda.h",
                capture_headers=(Path(cuda_toolchain.__file__).parent / cuda_toolchain.LEGACY_HEADER,),
            )
        ]  # fmt: skip
        archs = [gpu.arch] if gpu is not None else list(self.dialect.compile_archs)
        hipcc = amd.hipcc_path()
        arch = next((a for a in archs if hipcc and amd.compilers_for(a)), archs[0] if archs else "gfx90a")
        chains.append(
            DriverToolchain(
                "hipcc", self.name, "hip", hipcc, f"hipcc {amd.hipcc_version() or '?'} {arch}",
                missing="install hipcc (apt-get install hipcc) to build HIP programs for AMD GPUs",
                flags=("-O2", f"--offload-arch={arch}"), device_flags=("-x", "hip"), all_device=True,
                include_dirs=(amd_include_dir(),),
                env={"HIP_PLATFORM": "amd"}, find_device=lambda: gpu, command_vars=("HIPCC", "NVCC"),
                capture_header=Path(__file__).parent / "porter_capture_hip.h", capture_flags=("-std=c++17",),
                capture_link_flags=("-rdynamic",),  # porter_capture.h needs C++17; kernels named by dladdr
            )
        )  # fmt: skip
        return tuple(chains)

    def compile_archs(self) -> list[str]:
        """The AMD archs of dialect.toml's ``compile_archs`` a compiler installed here reaches."""
        return [a for a in self.dialect.compile_archs if amd.compilers_for(a)]

    # ------------------------------------------------------------------ discovery

    def devices(self) -> list[Device]:
        """AMD GPUs (hip-python) and NVIDIA GPUs (CuPy, platform 'hip-on-cuda'); [] when neither."""
        found = list(amd_runtime.list_devices())
        found += [
            dataclasses.replace(d, backend=self.name, platform=HIP_ON_CUDA)
            for d in cupy_runtime.list_devices("cuda", "cuda")
        ]
        return found

    def availability(self) -> Availability:
        settings = amd.settings()
        amd_archs = sorted(
            {a for a in (*settings["hipcc"]["archs"], *settings["clang"]["archs"]) if amd.compilers_for(a)}
        )
        nvidia = bool(self._cuda.compilers())
        devices = tuple(self.devices())
        details = []
        if amd.hipcc_path():
            details.append(f"hipcc {amd.hipcc_version()} at {amd.hipcc_path()}")
        if amd.clang_path():
            details.append(
                f"clang {amd.clang_version()} at {amd.clang_path()}, ld.lld {amd.lld_path() or 'missing'}"
            )
        details.append(f"AMD targets: {', '.join(amd_archs) or 'none'}")
        details.append(
            f"hip-on-cuda: {'yes (' + ', '.join(self._cuda.compilers()) + ')' if nvidia else 'no'}"
        )
        hint = ""
        if not amd_archs and not nvidia:
            hint = settings["hints"]["compile"]
        elif not devices:
            hint = settings["hints"]["run"]
        default = str(settings["default_arch"]) if amd_archs else str(settings["hip_on_cuda_arch"])
        return Availability(
            name=self.name,
            compile=bool(amd_archs) or nvidia,
            run=bool(devices),
            toolchain=self.toolchain_id(arch=default) if (amd_archs or nvidia) else "",
            devices=devices,
            hint=hint,
            details=tuple(details),
        )

    def target_arch(self, device: Device | None = None, options: CompileOptions | None = None) -> str:
        if options is not None and options.arch:
            return options.arch
        if device is not None:
            return device.arch
        return str(amd.settings()["default_arch"])

    def _amd_compiler(self, arch: str, requested: str | None) -> str:
        usable = amd.compilers_for(arch)
        if requested:
            if requested not in ("hipcc", "clang"):
                raise ToolchainMissing(
                    f"hip: {requested!r} cannot compile for AMD {arch}; use hipcc or clang"
                )
            if requested not in usable:
                raise ToolchainMissing(
                    f"hip: {requested} cannot compile for {arch} here; {amd.settings()['hints']['compile']}"
                )
            return requested
        if not usable:
            raise ToolchainMissing(
                f"hip: no compiler here reaches {arch}; {amd.settings()['hints']['compile']}"
            )
        return usable[0]

    def toolchain_id(
        self, device: Device | None = None, arch: str | None = None, *, compiler: str | None = None
    ) -> str:
        """AMD: 'hipcc:<path>:<version>|gfx90a|driver-<v>'; NVIDIA: 'hip-on-cuda-<hdr>|nvrtc-13.5|sm_90|driver-<v>'."""
        arch = arch or self.target_arch(device)
        if is_nvidia_target(arch):
            cuda_id = self._cuda.toolchain_id(device, arch, compiler=compiler)
            return f"{HIP_ON_CUDA}-{header_digest()}|{cuda_id}"
        usable = amd.compilers_for(arch)
        chosen = compiler or (usable[0] if usable else "none")
        version = amd.version_of(chosen) if chosen in ("hipcc", "clang") else "none"
        driver = device.driver if device is not None and device.driver else "none"
        return f"{version}|{arch}|driver-{driver}"

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
    ) -> Binary:
        """HIP device code -> hsaco (AMD arch) or cubin/PTX (NVIDIA arch, via the HIP-on-CUDA header).

        Extra keywords: `compiler` (hipcc | clang for AMD; nvrtc | nvcc for NVIDIA) and `report`
        (NVIDIA only: run ptxas -v; AMD reports always come with the code object).
        """
        flag_compiler, flags = split_compiler_flag(options.flags)
        requested = compiler or flag_compiler
        arch = self.target_arch(device, options)
        if is_nvidia_target(arch):
            import tempfile

            from porter.backends.hip.names import NAMES_HEADER, hip_names_header

            nvidia_options = dataclasses.replace(options, arch=arch, flags=flags)
            # the host runtime's names too: a real program's kernel file includes host helpers
            # (helper_cuda.h calling hipGetErrorName), which nvcc then builds beside the device code
            with tempfile.TemporaryDirectory(prefix="porter-hip-names-") as names:
                (Path(names) / NAMES_HEADER).write_text(hip_names_header(), encoding="utf-8")
                try:
                    binary = self._cuda.compile(
                        _prelude(source),
                        entry,
                        nvidia_options,
                        None if device is None else dataclasses.replace(device, backend="cuda"),
                        compiler=requested,
                        report=report,
                        extra_include_dirs=(include_dir(), names),
                        backend_name=self.name,
                    )
                except CompileError as err:  # show the user's source, whose line numbers the log uses
                    raise CompileError(
                        self.name, err.log, source, err.options, entry, summary=err.summary
                    ) from None
            return dataclasses.replace(
                binary,
                toolchain=f"{HIP_ON_CUDA}-{header_digest()}|{binary.toolchain}",
                meta={**binary.meta, "platform": HIP_ON_CUDA},
            )
        chosen = self._amd_compiler(arch, requested)
        output = options.output or str(amd.settings()["default_output"])
        if output != "hsaco":
            raise ToolchainMissing(f"hip: AMD targets produce 'hsaco' code objects, not {output!r}")
        compiled = amd.compile_source(
            _prelude(source),
            entry,
            shown_source=source,
            arch=arch,
            compiler=chosen,
            include_dirs=(*options.include_dirs, amd_include_dir()),
            defines=options.defines,
            flags=flags,
            debug=options.debug,
        )
        return Binary(
            backend=self.name,
            entry=compiled.entry,
            arch=arch,
            format="hsaco",
            data=compiled.data,
            toolchain=self.toolchain_id(device, arch, compiler=chosen),
            log=compiled.log,
            report=compiled.report,
            meta={
                "compiler": chosen,
                "options": compiled.command[1:],
                "platform": "rocm",
                "name_expression": entry,
            },
        )

    # ------------------------------------------------------------------ run

    @staticmethod
    def _on_cuda(device: Device) -> bool:
        return device.platform == HIP_ON_CUDA

    @staticmethod
    def _as_cuda(device: Device) -> Device:
        return dataclasses.replace(device, backend="cuda", platform="cuda")

    def load(self, binary: Binary, device: Device) -> Program:
        if self._on_cuda(device):
            return self._cuda.load(binary, self._as_cuda(device))
        if binary.format != "hsaco":
            raise ToolchainMissing(
                f"hip: cannot load a {binary.format!r} binary on AMD device {device.label}"
            )
        return amd_runtime.HipProgram(binary, device)

    def set_symbol(self, program: Program, name: str, value: np.ndarray | np.generic) -> None:
        """hipMemcpyToSymbol on a loaded program: NVIDIA (hip-on-cuda) through the cuda backend."""
        if isinstance(program, cupy_runtime.CupyProgram):
            self._cuda.set_symbol(program, name, value)
            return
        raise LaunchError(
            f"hip: setting the module global {name!r} is not supported on AMD devices yet "
            "(hipModuleGetGlobal is not wired up)"
        )

    def bind_texture(self, program: Program, name: str, value: np.ndarray) -> None:
        """hipBindTexture of the translation's ``porter_texref<T>`` (backends/hip/texrefs.py) on a loaded
        program: on NVIDIA (hip-on-cuda) the reference reads a device copy of `value`."""
        if isinstance(program, cupy_runtime.CupyProgram):
            program.bind_texture(name, value)
            return
        raise LaunchError(
            f"hip: binding the texture reference {name!r} is not supported on AMD devices yet "
            "(hipModuleGetGlobal is not wired up)"
        )

    def alloc(self, nbytes: int, device: Device) -> Any:
        if self._on_cuda(device):
            return self._cuda.alloc(nbytes, self._as_cuda(device))
        return amd_runtime.alloc(nbytes, device.index)

    def to_device(self, array: np.ndarray, device: Device) -> Any:
        if self._on_cuda(device):
            return self._cuda.to_device(array, self._as_cuda(device))
        return amd_runtime.to_device(array, device.index)

    def to_host(self, buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        if isinstance(buffer, amd_runtime.HipBuffer):
            return amd_runtime.to_host(buffer, dtype, shape)
        return self._cuda.to_host(buffer, dtype, shape)

    def synchronize(self, device: Device) -> None:
        if self._on_cuda(device):
            self._cuda.synchronize(self._as_cuda(device))
        else:
            amd_runtime.synchronize(device.index)

    def checkers(self, device: Device) -> tuple[str, ...]:
        """hip-on-cuda: the port runs as CUDA on the NVIDIA GPU, so it gets the cuda backend's checkers there
        (compute-sanitizer memcheck and racecheck), the same evidence as the original on that GPU; AMD GPUs:
        none here."""
        return self._cuda.checkers(self._as_cuda(device)) if self._on_cuda(device) else ()

    def scrub_shared(self, device: Device) -> None:
        """hip-on-cuda: poison shared memory like the cuda backend; AMD GPUs: not available (no-op)."""
        if self._on_cuda(device):
            self._cuda.scrub_shared(self._as_cuda(device))

    def flush_cache(self, device: Device) -> None:
        if self._on_cuda(device):
            self._cuda.flush_cache(self._as_cuda(device))
            return
        facts = amd.settings()["arch"].get(device.arch, {})
        amd_runtime.flush_cache(device.index, int(facts.get("l2_bytes", 8 * 1024 * 1024)))


def compile_only_device(arch: str) -> Device:
    """A Device describing an AMD target with nothing to run on (facts from toolchains.toml)."""
    facts = amd.settings()["arch"].get(arch, {})
    return Device(
        backend="hip",
        name=str(facts.get("name", arch)),
        arch=arch,
        kind="gpu",
        platform="rocm",
        compiler="amd-clang",
        facts=HardwareFacts(
            warp_size=int(facts.get("warp_size", 64)),
            max_threads_per_block=int(facts.get("max_threads_per_block", 1024)),
            shared_mem_per_block=int(facts.get("shared_mem_per_block", 65536)),
        ),
        contracts=True,
    )
