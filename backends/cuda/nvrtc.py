"""Compiling device-only CUDA C++ with NVRTC (cuda-bindings + nvidia-cuda-nvrtc; no GPU needed).

The entry is added as an NVRTC *name expression*, so ``axpby<float>`` or ``block_sum<256>`` are
instantiated and come back as the lowered (mangled) symbol to launch; plain ``extern "C"`` names
lower to themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from porter.backends import CompileError, ToolchainMissing


@dataclass(frozen=True)
class Compiled:
    data: bytes  # cubin, or PTX text without the trailing NUL
    entry: str  # the symbol to launch
    log: str
    ptx: str = ""


# the name the source is compiled under: never one a program's own `#include "kernel.cu"` (Rodinia's bfs)
# names, which would then include the source itself
SOURCE_NAME = "porter_kernel.cu"


def _check(result: object, what: str) -> None:
    from cuda.bindings import nvrtc

    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainMissing(f"NVRTC failed in {what}: {result}")


def _out(size: int) -> bytearray:
    """A writable buffer for NVRTC to fill.  Never a ``bytes`` object: NVRTC writes into what it is
    given, and ``b" " * 1`` is CPython's shared one-byte singleton, so an empty log (one NUL byte)
    turned every b" " in the process into b"\\x00" and silently changed later parses."""
    return bytearray(size)


def _log(prog: object) -> str:
    from cuda.bindings import nvrtc

    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    _check(err, "nvrtcGetProgramLogSize")
    buf = _out(size)
    (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
    _check(err, "nvrtcGetProgramLog")
    return bytes(buf).rstrip(b"\x00").decode("utf-8", "replace")


def _ptx(prog: object) -> str:
    from cuda.bindings import nvrtc

    err, size = nvrtc.nvrtcGetPTXSize(prog)
    _check(err, "nvrtcGetPTXSize")
    buf = _out(size)
    (err,) = nvrtc.nvrtcGetPTX(prog, buf)
    _check(err, "nvrtcGetPTX")
    return bytes(buf).rstrip(b"\x00").decode("utf-8", "replace")


def _cubin(prog: object) -> bytes:
    from cuda.bindings import nvrtc

    err, size = nvrtc.nvrtcGetCUBINSize(prog)
    _check(err, "nvrtcGetCUBINSize")
    buf = _out(size)
    (err,) = nvrtc.nvrtcGetCUBIN(prog, buf)
    _check(err, "nvrtcGetCUBIN")
    return bytes(buf)


def nvrtc_options(
    arch: str,
    output: str,
    *,
    include_dirs: Sequence[str],
    defines: Sequence[str],
    flags: Sequence[str],
    debug: bool,
    report: bool,
) -> list[str]:
    """NVRTC command line: sm_XX produces a cubin (and runs ptxas), compute_XX only PTX.

    ``-default-device`` makes unannotated functions device functions: NVRTC refuses host functions,
    and device-only code keeps the helper headers of its project (whose small unannotated helpers
    nvcc would have treated as host code that the kernels never call)."""
    virtual = arch.replace("sm_", "compute_", 1)
    opts = [f"--gpu-architecture={arch if output == 'cubin' or report else virtual}", "-default-device"]
    if report:
        opts.append("--ptxas-options=-v")
    if debug:
        opts.append("--device-debug")
    opts += [f"-D{d}" for d in defines]
    opts += [f"-I{d}" for d in include_dirs]
    opts += list(flags)
    return opts


def compile_source(
    source: str, entry: str, options: Sequence[str], output: str, *, backend: str = "cuda"
) -> Compiled:
    """Compile `source` with NVRTC; raises CompileError carrying the log and the numbered source."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as missing:
        raise ToolchainMissing("NVRTC not installed: pip install 'porter-gpu[cuda]'") from missing

    err, prog = nvrtc.nvrtcCreateProgram(
        source.encode("utf-8", "surrogateescape"), SOURCE_NAME.encode(), 0, [], []
    )
    _check(err, "nvrtcCreateProgram")
    try:
        if entry:  # empty: compile only, no kernel looked up (template kernels no launch instantiates)
            (err,) = nvrtc.nvrtcAddNameExpression(prog, entry.encode())
            _check(err, "nvrtcAddNameExpression")
        encoded = [o.encode() for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _log(prog)
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(backend, log or str(result), source, options, entry)
        if not entry:
            ptx = _ptx(prog)
            return Compiled(
                data=_cubin(prog) if output == "cubin" else ptx.encode(), entry="", log=log, ptx=ptx
            )
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, entry.encode())
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or not lowered:
            raise CompileError(
                backend, f"{log}\nNVRTC could not lower the entry {entry!r}: {err}", source, options, entry
            )
        name = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
        ptx = _ptx(prog)
        data = _cubin(prog) if output == "cubin" else ptx.encode()
        return Compiled(data=data, entry=name, log=log, ptx=ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
