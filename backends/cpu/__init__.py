"""The `cpu` backend: CUDA and HIP device code emulated on the CPU.

The kernel is compiled by g++ as C++ together with our header ``porter_emu.h``, which maps
thread/block indices, ``__shared__``, barriers, atomics, warp shuffles and votes onto
coroutines (one per CUDA thread) run by a seeded random scheduler on one OS thread.  It is the
independent oracle that lets a CPU-only machine run CUDA and HIP kernels; see docs/EMULATOR.md
for what it models and what it refuses ("cannot emulate: ...").

    be = CpuBackend()
    dev = be.devices()[0]
    prog = be.load(be.compile(src, "saxpy"), dev)
    x = be.to_device(np.arange(10, dtype=np.float32), dev)
    prog(x, np.float32(2), np.int32(10), grid=(1,), block=(32,), seed=7)
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import secrets
import shutil
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from porter.backends import (
    Availability,
    BackendBase,
    Binary,
    CannotEmulate,
    CompileError,
    CompileOptions,
    Device,
    HardwareFacts,
    LaunchError,
    ToolchainMissing,
    guards,
)
from porter.backends.cpu import source as src_mod
from porter.backends.dialect import DialectFacts, load_facts

PACKAGE = "porter.backends.cpu"
HEADER = "porter_emu.h"
COMPILE_TIMEOUT_S = 300
DEFAULT_OPTIONS = CompileOptions()


@cache
def _dialect() -> DialectFacts:
    return load_facts(PACKAGE)


@cache
def _header_text() -> str:
    return resources.files(PACKAGE).joinpath(HEADER).read_text(encoding="utf-8")


FP16_HEADER = "porter_fp16.h"  # half precision and bfloat16 (the stubs of cuda_fp16.h and friends)
CG_HEADER = "porter_cooperative_groups.h"  # cooperative groups (porter_emu.h includes it)


def _cg_text() -> str:
    return resources.files(PACKAGE).joinpath(CG_HEADER).read_text(encoding="utf-8")


def _fp16_text() -> str:
    return resources.files(PACKAGE).joinpath(FP16_HEADER).read_text(encoding="utf-8")


# the host runtime API a kernel's build declares (porter_emu.h includes it outside whole programs)
HOST_DECLS_HEADER = "porter_host_decls.h"


TYPES_HEADER = "porter_cuda_types.h"  # the vector types and dim3 porter_emu.h includes


@cache
def _types_text() -> str:
    return resources.files(PACKAGE).joinpath(TYPES_HEADER).read_text(encoding="utf-8")


def _host_decls_text() -> str:
    return resources.files(PACKAGE).joinpath(HOST_DECLS_HEADER).read_text(encoding="utf-8")


@cache
def _cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (/proc/cpuinfo's ``flags``, ``Features`` on Arm); empty where unreadable."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@cache
def _compiler_version(compiler: str) -> str:
    from porter.toolcache import tool_output

    code, out = tool_output([compiler, "-dumpfullversion"], timeout=30)
    return out.strip() if code == 0 else ""


def warp_size_for(arch: str | None, defines: Sequence[str] = ()) -> int:
    """The emulated warp size: PORTER_WARP_SIZE=N in defines, else by arch (dialect.toml)."""
    for d in defines:
        name, _, value = d.partition("=")
        if name.strip() == "PORTER_WARP_SIZE" and value.strip().isdigit():
            return int(value)
    table = _dialect().warp_size
    assert isinstance(table, Mapping), "backends/cpu/dialect.toml: [warp_size] is a table"
    if arch:
        best = max((p for p in table if arch.startswith(p)), key=len, default=None)
        if best is not None:
            return table[best]
    return int(_dialect().default_warp_size or 32)


def _rewritten_headers(source: str, include_dirs: Sequence[str], into: Path) -> tuple[str, ...]:
    """The include path of `source`'s build: `include_dirs`, each preceded by a folder of rewritten
    copies of the headers `source` reaches in it that declare ``__shared__`` memory (a helper's
    ``extern __shared__ T s[];`` in a header, as the source's own are rewritten), mark functions
    ``__noinline__`` (spelled as the attribute: porter_emu.h defines no macro for it) or hold host code
    (an included ``.cu`` driver, a helper's error check: :func:`source.inert_host_code`), laid out as they
    lie under that folder.  A header lies under every include folder above it (the program's root and
    its ``include/``): ``#include "ops.cuh"`` found through the second reaches its copy there, as
    ``#include "include/ops.cuh"`` through the first does, and a header found earlier on the path keeps
    coming first.  `include_dirs` as they are when no header needs it."""
    from porter.includes import reachable

    if not include_dirs:
        return ()
    roots = [Path(d).resolve() for d in include_dirs]
    shadows = [into / str(i) for i in range(len(roots))]
    wrote: set[int] = set()
    found = list(reachable([("", source.encode("utf-8", "surrogateescape"))], include_dirs))[1:]
    texts: dict[Path, tuple[str, str]] = {}  # header -> (as it is, as the build reads it)
    for path, data in found:
        text = data.decode("utf-8", "surrogateescape")
        rewritten = src_mod.inert_host_code(text)
        if b"__shared__" in data or b"__noinline__" in data:
            rewritten = src_mod.spell_noinline(src_mod.rewrite_shared(rewritten))
        texts[Path(path).resolve()] = (text, rewritten)
    for i, root in enumerate(roots):
        under = {w: t for w, t in texts.items() if w.is_relative_to(root)}
        if all(t == r for t, r in under.values()):
            continue
        # every header under the folder, rewritten or not: a quoted #include looks beside the including
        # file first, so a header reached through another one (main.cu -> work.cu -> master.cu) is read
        # from the copy only if the one including it is a copy too
        for where, (_, rewritten) in under.items():
            dest = shadows[i] / where.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(rewritten, encoding="utf-8", errors="surrogateescape")
        wrote.add(i)
    out: list[str] = []
    for i, d in enumerate(include_dirs):
        out += [str(shadows[i]), d] if i in wrote else [d]
    return tuple(out)


def _check_imports(
    built: Path, rules: Any, compiler: str, source: str, shown: Sequence[str], entry: str
) -> None:
    """CompileError when an untrusted kernel's shared object takes a symbol device code has no use for
    from the process it will be loaded into (``environ``, ``stdout``, a libc function reached by an
    alias), or when that cannot be checked here."""
    from porter.backends.cpu.imports import ImportCheckUnavailable, refused_imports

    try:
        refused = refused_imports(built, rules, compiler)
    except (ImportCheckUnavailable, OSError, subprocess.TimeoutExpired) as err:
        raise CompileError(
            "cpu", f"cannot check what the kernel takes from the host process, so it is not run: {err}",
            source, list(shown), entry,
        ) from None  # fmt: skip
    if refused:
        why = (
            f"the kernel refers to host symbol(s) device code cannot use: {', '.join(refused)} "
            "(only the emulator's runtime, the math library and what a GPU offers device code are allowed)"
        )
        raise CompileError(
            "cpu", why, source, list(shown), entry, summary=f"compile of {entry} failed: {why}"
        )


def asan_environment() -> dict[str, str]:
    """Environment a child process needs to run binaries compiled with CompileOptions(debug=True)."""
    compiler = str(_dialect().compiler["command"])
    try:
        out = subprocess.run(
            [compiler, "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=30
        )
        lib = out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        lib = "libasan.so"
    return {"LD_PRELOAD": lib, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}


def asan_loaded() -> bool:
    """Whether the AddressSanitizer runtime is loaded in this process."""
    return hasattr(ctypes.CDLL(None), "__asan_init")


@dataclass
class CpuBuffer:
    """Device memory of the emulator: a NumPy byte array in this process."""

    array: np.ndarray  # uint8, C-contiguous

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    @property
    def ptr(self) -> int:
        return int(self.array.ctypes.data)


_SCALAR_KIND = {"f": "f", "i": "i", "u": "u", "b": "u"}


class CpuProgram:
    """A loaded emulated kernel.  Each launch runs under its own scheduling seed.

    ``seed``: the base seed (random unless set); launch k uses a seed derived from (seed, k)
    unless a ``seed=`` keyword is given.  ``last_seed`` is the seed of the latest launch, so a
    schedule that exposed a bug can be replayed with ``prog(..., seed=prog.last_seed)``.
    """

    def __init__(self, binary: Binary, path: str) -> None:
        self.binary = binary
        self._lib = ctypes.CDLL(path)
        self._launch = self._lib.porter_launch
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.c_ulonglong,
            ctypes.c_ulonglong,
        ]
        self._lib.porter_error.restype = ctypes.c_char_p
        self._lib.porter_signature.restype = ctypes.c_char_p
        self.warp_size = int(self._lib.porter_warp_size())
        sig = self._lib.porter_signature().decode()
        self.signature: tuple[str, ...] = tuple(sig.split(",")) if sig else ()
        self.seed = secrets.randbits(63)
        self.last_seed: int | None = None
        # warp shuffles that read a lane CUDA leaves undefined (porter_emu.h undefined_read): the first of
        # them since load, in words ("" when none), and how many its launch made
        self.undefined_reads = ""
        self._lib.porter_undefined_first.restype = ctypes.c_char_p
        self._lib.porter_undefined_count.restype = ctypes.c_ulonglong
        self._lib.porter_set_undefined_lanes.argtypes = [ctypes.c_int]
        self._launches = 0
        self._textures: dict[str, np.ndarray] = {}  # the memory each bound texture reads, kept while loaded
        facts = _dialect().facts
        self._max_threads = int(facts["max_threads_per_launch"])
        self._max_dyn = int(facts["max_dynamic_shared"])

    # ------------------------------------------------------------------ launch

    def __call__(
        self,
        *args: Any,
        grid: Sequence[int],
        block: Sequence[int],
        shared_bytes: int = 0,
        timed: bool = False,
        seed: int | None = None,
    ) -> float | None:
        g, b = _dims(grid, "grid"), _dims(block, "block")
        threads_per_block = b[0] * b[1] * b[2]
        if not 1 <= threads_per_block <= 1024:
            raise LaunchError(f"cpu: block of {threads_per_block} threads (the limit is 1024)")
        total = threads_per_block * g[0] * g[1] * g[2]
        if total > self._max_threads:
            raise LaunchError(
                f"cpu: {total} threads in one launch; the emulator's limit is {self._max_threads} "
                "(use a smaller problem size)"
            )
        if not 0 <= shared_bytes <= self._max_dyn:
            raise LaunchError(f"cpu: {shared_bytes} bytes of dynamic shared memory (limit {self._max_dyn})")
        if len(args) != len(self.signature):
            raise LaunchError(
                f"cpu: {self.binary.entry} takes {len(self.signature)} arguments, {len(args)} given"
            )
        keep = [
            self._marshal(i, a, kind) for i, (a, kind) in enumerate(zip(args, self.signature, strict=True))
        ]
        ptrs = (ctypes.c_void_p * max(len(keep), 1))(*[ctypes.addressof(k) for k in keep])
        if seed is None:
            seed = (self.seed * 0x9E3779B1 + self._launches * 0x632BE5AB + 1) & (2**64 - 1)
        self._launches += 1
        self.last_seed = seed
        cg = (ctypes.c_uint * 3)(*g)
        cb = (ctypes.c_uint * 3)(*b)
        start = time.perf_counter()
        rc = self._launch(ptrs, len(keep), cg, cb, shared_bytes, seed)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        if not self.undefined_reads and (count := int(self._lib.porter_undefined_count())):
            first = (self._lib.porter_undefined_first() or b"").decode(errors="replace")
            self.undefined_reads = f"{first} ({count} such read{'s' if count > 1 else ''} in the launch)"
        if rc != 0:
            msg = (self._lib.porter_error() or b"emulated launch failed").decode(errors="replace")
            raise LaunchError(f"cpu: {self.binary.entry}: {msg} (seed {seed})")
        return elapsed_ms if timed else None

    def set_undefined_lanes(self, poison: bool) -> None:
        """From the next launch on, a warp shuffle reading a lane CUDA leaves undefined (outside the
        caller's mask, exited, beyond the block) reads a poison pattern (a NaN as float and double, a
        large integer) instead of 0, as NVIDIA GPUs do: a result that changes depends on those lanes."""
        self._lib.porter_set_undefined_lanes(1 if poison else 0)

    def _marshal(self, index: int, value: Any, kind: str) -> ctypes.c_void_p | ctypes.Array[ctypes.c_char]:
        code, size = kind[0], int(kind[1:])
        where = f"cpu: argument {index + 1} of {self.binary.entry}"
        if code == "p":
            if isinstance(value, CpuBuffer):
                return ctypes.c_void_p(value.ptr)
            if isinstance(value, np.ndarray):
                if not value.flags.c_contiguous:
                    raise LaunchError(f"{where}: array must be C-contiguous")
                return ctypes.c_void_p(int(value.ctypes.data))
            if value is None:
                return ctypes.c_void_p(0)
            raise LaunchError(f"{where}: the kernel expects a pointer, got {type(value).__name__}")
        if isinstance(value, (CpuBuffer, np.ndarray)):
            raise LaunchError(f"{where}: the kernel expects a scalar ({kind}), got an array")
        if code == "s" and isinstance(value, np.generic) and value.dtype.itemsize == size:
            raw = value.tobytes()  # a struct passed by value: a structured NumPy scalar of its size
        elif isinstance(value, np.generic):
            vkind = _SCALAR_KIND.get(value.dtype.kind)
            same = vkind is not None and (vkind == code or (vkind in "iu" and code in "iu"))
            if vkind is None or not same or value.dtype.itemsize != size:
                raise LaunchError(f"{where}: the kernel expects {_c_name(kind)}, got numpy {value.dtype}")
            raw = value.tobytes()
        elif isinstance(value, (bool, int, float)) and code in "iuf":
            raw = np.array(value).astype(_np_type(kind)).tobytes()
        elif isinstance(value, (bytes, bytearray)) and len(value) == size:
            raw = bytes(value)
        else:
            raise LaunchError(f"{where}: the kernel expects {_c_name(kind)}, got {type(value).__name__}")
        storage = (ctypes.c_char * max(size, 1)).from_buffer_copy(raw.ljust(max(size, 1), b"\0"))
        return storage

    # ------------------------------------------------------------------ globals

    def symbol_address(self, name: str) -> int:
        """Address of a namespace-scope `__device__` / `__constant__` variable."""
        try:
            return ctypes.addressof(ctypes.c_char.in_dll(self._lib, name))
        except ValueError as err:
            raise LaunchError(f"cpu: no global symbol {name!r} in {self.binary.entry}'s program") from err

    def set_symbol(self, name: str, value: np.ndarray | np.generic) -> None:
        """cudaMemcpyToSymbol: copy `value`'s bytes into the global `name` (size is the caller's)."""
        data = np.ascontiguousarray(value).tobytes()
        ctypes.memmove(self.symbol_address(name), data, len(data))

    def bind_texture(self, name: str, value: np.ndarray) -> None:
        """cudaBindTexture: the texture reference `name` reads a copy of `value`.  A texture reference --
        porter_emu.h's ``texture<T, 1>`` and the HIP translation's ``porter_texref<T>`` alike -- begins
        with the bound pointer and its size in bytes; a fetch past them reads zero."""
        data = np.array(value, copy=True, order="C")
        self._textures[name] = data
        at = self.symbol_address(name)
        ctypes.c_void_p.from_address(at).value = int(data.ctypes.data) if data.nbytes else None
        ctypes.c_size_t.from_address(at + ctypes.sizeof(ctypes.c_void_p)).value = data.nbytes

    def get_symbol(self, name: str, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        """cudaMemcpyFromSymbol: a copy of the global `name` viewed as dtype/shape."""
        out = np.empty(tuple(shape), dtype=dtype)
        ctypes.memmove(out.ctypes.data, self.symbol_address(name), out.nbytes)
        return out


def _dims(values: Sequence[int] | int, what: str) -> tuple[int, int, int]:
    vals = [int(values)] if isinstance(values, (int, np.integer)) else [int(v) for v in values]
    if not 1 <= len(vals) <= 3 or any(v < 1 for v in vals):
        raise LaunchError(f"cpu: bad {what} dimensions {tuple(vals)}")
    vals += [1] * (3 - len(vals))
    return vals[0], vals[1], vals[2]


def _np_type(kind: str) -> np.dtype:
    return np.dtype(f"{kind[0]}{kind[1:]}")


def _c_name(kind: str) -> str:
    names = {
        "f4": "float",
        "f8": "double",
        "i4": "int",
        "u4": "unsigned int",
        "i8": "long long",
        "u8": "unsigned long long",
        "i2": "short",
        "u2": "unsigned short",
        "i1": "char",
        "u1": "unsigned char/bool",
    }
    return names.get(kind, f"a {kind[1:]}-byte value")


class CpuBackend(BackendBase):
    """Emulation of CUDA / HIP kernels on the CPU (g++ + porter_emu.h + coroutines)."""

    name: ClassVar[str] = "cpu"
    runs: ClassVar[tuple[str, ...]] = ("cuda", "hip")
    sets_symbols: ClassVar[bool] = True
    builds_without_device: ClassVar[bool] = False  # the emulator is its own device
    poisons_undefined_lanes: ClassVar[bool] = True  # porter_emu.h's undefined_read()
    watches_writes: ClassVar[bool] = True  # its buffers are the child's guarded memory (guards.watch)

    @property
    def dialect(self) -> DialectFacts:
        return _dialect()

    @cached_property
    def _compiler(self) -> str:
        return str(self.dialect.compiler["command"])

    def _compiler_path(self) -> str | None:
        return shutil.which(self._compiler)

    # ------------------------------------------------------------------ discovery

    def availability(self) -> Availability:
        found = self._compiler_path() is not None and bool(_compiler_version(self._compiler))
        devs = tuple(self.devices()) if found else ()
        return Availability(
            name=self.name,
            compile=found,
            run=found,
            toolchain=self.toolchain_id() if found else "",
            devices=devs,
            hint="" if found else "install g++ (GCC 12 or newer): apt-get install g++",
            details=(f"warp size {self.dialect.default_warp_size} (wave64 via arch 'wave64' or gfx9*)",),
        )

    def devices(self) -> list[Device]:
        if self._compiler_path() is None:
            return []
        facts = self.dialect.facts
        return [
            Device(
                backend=self.name,
                name="cpu-emulator",
                arch=platform.machine() or "cpu",
                kind="emulator",
                platform="porter_emu",
                compiler="porter-emu",
                driver=f"g++ {_compiler_version(self._compiler)}",
                facts=HardwareFacts(
                    warp_size=int(self.dialect.default_warp_size or 32),
                    max_threads_per_block=int(facts["max_threads_per_block"]),
                    shared_mem_per_block=int(facts["shared_mem_per_block"]),
                    multiprocessors=1,
                ),
            )
        ]

    def wavefront_device(self, width: int) -> Device | None:
        """The emulator with `width`-lane warps (``warpSize``, ballot masks and shuffles across all of
        them), as a device of its own (``cpu:cpu-emulator-wave64``: every verdict names the width);
        None for the default width or one it cannot emulate."""
        default = int(self.dialect.default_warp_size or 32)
        if width == default or width not in (32, 64) or self._compiler_path() is None:
            return None
        base = self.devices()[0]
        return replace(
            base, name=f"{base.name}-wave{width}", arch=f"wave{width}",
            facts=replace(base.facts, warp_size=width),
        )  # fmt: skip

    def contracting_flags(self, device: Device) -> tuple[str, ...]:
        """dialect.toml's ``[compiler.contracting]`` flags for this machine, when its CPU has the FMA
        instruction they need."""
        found = self.dialect.compiler.get("contracting", {}).get(platform.machine(), {})
        need = str(found.get("cpu_flag", ""))
        return tuple(found.get("flags", ())) if found and (not need or need in _cpu_flags()) else ()

    def _flags(self, options: CompileOptions) -> list[str]:
        comp = self.dialect.compiler
        flags = [f"-std={comp['std']}", *comp["flags"]]
        if options.debug:
            flags += comp["debug_flags"]
        return flags

    def toolchain_id(self, device: Device | None = None, arch: str | None = None) -> str:
        headers = _header_text() + _types_text() + _cg_text() + _fp16_text() + _host_decls_text()
        digest = hashlib.sha256(headers.encode()).hexdigest()[:12]
        flags = " ".join(self._flags(CompileOptions()))
        # the wavefront device (arch "wave64") builds for its width; otherwise the arch asked for
        warp = warp_size_for(arch or (device.arch if device is not None else None))
        return f"g++ {_compiler_version(self._compiler) or '?'} [{flags}] porter_emu {digest} warp{warp}"

    # ------------------------------------------------------------------ compile / load

    def compile(
        self, source: str, entry: str, options: CompileOptions = DEFAULT_OPTIONS, device: Device | None = None
    ) -> Binary:
        compiler = self._compiler_path()
        if compiler is None:
            raise ToolchainMissing("cpu emulation needs g++ (GCC 12 or newer): apt-get install g++")
        dialect = self.dialect
        try:  # "": compile only, no kernel looked up (a unit whose template kernels no launch instantiates)
            entry = src_mod.check_entry(entry) if entry else ""
        except ValueError as err:
            raise CompileError(self.name, str(err), source, entry=entry, summary=str(err)) from None
        src_mod.check_emulable(source, dialect, options.include_dirs)
        arch = options.arch or (device.arch if device is not None else None)  # x86_64: the default width
        warp = warp_size_for(arch, options.defines)
        if warp not in (32, 64):
            raise CannotEmulate(f"cannot emulate: warp size {warp} (32 or 64 only)")
        hip = src_mod.is_hip(source)
        flags = self._flags(options)
        defines = [f"-D{d}" for d in options.defines if not d.startswith("PORTER_WARP_SIZE")]
        defines.append(f"-DPORTER_WARP_SIZE={warp}")
        if hip:
            defines.append("-DPORTER_HIP=1")
        elif not any(d.split("=", 1)[0] == "CUDART_VERSION" for d in options.defines):
            # nvcc includes cuda_runtime.h in every .cu, so device code sees its version: Rodinia cfd's
            # `#if CUDART_VERSION < 3000` struct double3 is for CUDA 2 only (HIP defines none: not there)
            from porter.backends.cpu.program import runtime_version

            defines.append(f"-DCUDART_VERSION={runtime_version()}")
        with tempfile.TemporaryDirectory(prefix="porter-cpu-") as tmp:
            tmpdir = Path(tmp)
            inc = tmpdir / "include"
            self._write_headers(inc)
            include_path = _rewritten_headers(source, options.include_dirs, tmpdir / "rewritten")
            unit = tmpdir / "porter_unit.cpp"
            unit.write_text(
                src_mod.translation_unit(
                    source, entry, untrusted=dialect.untrusted if options.untrusted else None
                ),
                encoding="utf-8",
                errors="surrogateescape",
            )
            out = tmpdir / "kernel.so"
            cmd = [
                compiler,
                *flags,
                *defines,
                f"-I{inc}",
                *[f"-I{d}" for d in include_path],
                *options.flags,
                str(unit),
                "-o",
                str(out),
            ]
            shown = [*flags, *defines, *options.flags]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise CompileError(self.name, "g++ timed out", source, shown, entry) from None
            log = (proc.stdout + proc.stderr).replace(str(tmpdir) + os.sep, "")
            if proc.returncode != 0 or not out.exists():
                missing = src_mod.undeclared_intrinsic(log)
                if missing is not None:
                    line, name = missing
                    raise CannotEmulate(f"cannot emulate: {name} (source line {line}; not in porter_emu.h)")
                first = src_mod.first_error(log)
                raise CompileError(
                    self.name, log or f"g++ exited with {proc.returncode}", source, shown, entry,
                    summary=f"compile of {entry or 'source'} failed: {first}" if first else "",
                )  # fmt: skip
            if options.untrusted:
                _check_imports(out, dialect.untrusted, compiler, source, shown, entry)
            data = out.read_bytes()
        return Binary(
            backend=self.name,
            entry=entry,
            arch=f"emu-warp{warp}",
            format="so",
            data=data,
            toolchain=self.toolchain_id(arch=arch),
            log=log,
            meta={
                "warp_size": warp,
                "dialect": "hip" if hip else "cuda",
                "timing": dialect.facts["timing"],
                "debug": options.debug,
            },
        )

    def _write_headers(self, inc: Path) -> None:
        inc.mkdir(parents=True, exist_ok=True)
        (inc / HEADER).write_text(_header_text(), encoding="utf-8")
        (inc / TYPES_HEADER).write_text(_types_text(), encoding="utf-8")
        (inc / CG_HEADER).write_text(_cg_text(), encoding="utf-8")
        (inc / FP16_HEADER).write_text(_fp16_text(), encoding="utf-8")
        (inc / HOST_DECLS_HEADER).write_text(_host_decls_text(), encoding="utf-8")
        for name in self.dialect.includes["stub"]:
            path = inc / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f'#pragma once\n#include "{HEADER}"\n', encoding="utf-8")
        for name in self.dialect.includes.get("blank", ()):  # OpenGL's: a call of it fails by name
            path = inc / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("#pragma once\n", encoding="utf-8")
        for name in self.dialect.includes.get("half", ()):
            path = inc / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                f'#pragma once\n#include "{HEADER}"\n#include "{FP16_HEADER}"\n', encoding="utf-8"
            )

    def load(self, binary: Binary, device: Device | None = None) -> CpuProgram:
        """dlopen a private copy of the binary (each load has its own globals and shared memory)."""
        if binary.backend != self.name:
            raise LaunchError(f"cpu: cannot load a {binary.backend} binary")
        debug = bool(binary.meta.get("debug"))
        if debug and not asan_loaded():
            env = " ".join(f"{k}={v}" for k, v in asan_environment().items())
            raise LaunchError(
                f"cpu: {binary.entry} was built with AddressSanitizer; run the process with {env}"
            )
        fd, path = tempfile.mkstemp(prefix="porter-cpu-", suffix=".so")
        keep = False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(binary.data)
            try:
                program = CpuProgram(binary, path)
            except OSError as err:
                raise LaunchError(f"cpu: cannot load {binary.entry}: {err}") from None
            if debug:  # keep the file while loaded, so sanitizer reports can be symbolised
                weakref.finalize(program, os.unlink, path)
                keep = True
            return program
        finally:
            if not keep:
                os.unlink(path)

    # ------------------------------------------------------------------ memory

    def alloc(self, nbytes: int, device: Device | None = None) -> CpuBuffer:
        """Fresh device memory, poisoned with 0xFF bytes (NaN / -1), as cudaMalloc promises nothing; in a
        child's job, inside guard zones (porter.backends.guards)."""
        buf = guards.host_bytes(nbytes)
        buf.fill(0xFF)
        return CpuBuffer(buf)

    def to_device(self, array: np.ndarray, device: Device | None = None) -> CpuBuffer:
        data = np.ascontiguousarray(array)
        buf = guards.host_bytes(data.nbytes)
        buf[: data.nbytes] = data.reshape(-1).view(np.uint8)
        return CpuBuffer(buf)

    def views(
        self, array: np.ndarray, offsets: Sequence[int], device: Device | None = None
    ) -> tuple[CpuBuffer, list[CpuBuffer]]:
        """`array` in one buffer and a pointer `offset` bytes into it per offset (arguments that point
        into one allocation: the same memory, so a write through one is read through the other)."""
        base = self.to_device(array, device)
        return base, [CpuBuffer(base.array[int(o) :]) for o in offsets]

    def to_host(self, buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        dt = np.dtype(dtype)
        count = int(np.prod(tuple(shape), dtype=np.int64))
        raw = buffer.array if isinstance(buffer, CpuBuffer) else np.asarray(buffer).reshape(-1).view(np.uint8)
        if count * dt.itemsize > raw.nbytes:
            raise LaunchError(f"cpu: buffer of {raw.nbytes} bytes read back as {count} x {dt}")
        return raw[: count * dt.itemsize].view(dt).reshape(tuple(shape)).copy()

    def set_symbol(self, program: CpuProgram, name: str, value: np.ndarray | np.generic) -> None:
        """cudaMemcpyToSymbol on a loaded program: `value`'s bytes into its global `name`."""
        program.set_symbol(name, value)

    def bind_texture(self, program: CpuProgram, name: str, value: np.ndarray) -> None:
        """cudaBindTexture on a loaded program: its texture reference `name` reads a copy of `value`."""
        program.bind_texture(name, value)

    def program_toolchains(self) -> tuple[Any, ...]:
        # and one per other width a language's GPUs run at, for the languages that run at it (dialect.toml
        # warp_size: HIP's 64-lane wavefronts), where the emulator has that width
        from porter.backends import dialect_names, get_dialect
        from porter.backends.cpu.program import CpuProgramToolchain

        widths: dict[int, list[str]] = {}
        for language in ("cuda", "hip"):
            if language not in dialect_names():
                continue
            facts = get_dialect(language).facts
            for width in (facts.warp_size, facts.warp_size_hip_on_cuda) if facts else ():
                if isinstance(width, int) and self.wavefront_device(width) is not None:
                    widths.setdefault(width, []).append(language)
        return (
            CpuProgramToolchain(self),
            *(CpuProgramToolchain(self, w, tuple(langs)) for w, langs in sorted(widths.items())),
        )

    def synchronize(self, device: Device | None = None) -> None:
        """Launches are synchronous on the emulator."""

    def flush_cache(self, device: Device | None = None) -> None:
        """Evict the CPU caches by writing a buffer larger than any last-level cache."""
        scratch = np.empty(64 * 1024 * 1024 // 8, dtype=np.float64)
        scratch.fill(1.0)


__all__ = ["CpuBackend", "CpuBuffer", "CpuProgram", "asan_environment", "asan_loaded", "warp_size_for"]
