"""The device-build gate: code porter did not write must build as device code for a real GPU first.

A model's candidate is compiled, compile-only and in a sandboxed child, by a real device compiler of
its dialect (the archs of ``device_check_archs`` in the target's ``dialect.toml``: NVRTC/nvcc for
CUDA; hipcc/clang for AMD or HIP-on-CUDA through NVRTC for HIP) before any device, the CPU emulator
included, runs it.  A device compiler rejects what a GPU build would: calls of host functions
(``system``, ``fopen``...), dynamic initialisers of ``__device__`` variables, host inline assembly.
Dialects without ``device_check_archs`` (OpenCL C) are compiled by device compilers only anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from porter.backends import CompileOptions, first_error, get_backend
from porter.backends.isolate import Job, run_job
from porter.model import Variant

GATE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class GateResult:
    ok: bool
    reason: str
    log: str = ""
    toolchain: str = ""


def device_build_check(variant: Variant, options: CompileOptions | None = None) -> GateResult:
    """Whether `variant` builds as device code for a real GPU compiler of its dialect (the first
    arch whose compiler is present decides)."""
    options = options or CompileOptions()
    try:
        archs = get_backend(variant.target).device_check_archs()
    except KeyError:
        return GateResult(False, f"unknown target {variant.target!r}")
    if not archs:
        return GateResult(True, f"{variant.target}: compiled by device compilers only")
    missing: list[str] = []
    for arch in archs:
        job = Job(
            backend=variant.target,
            source=variant.source,
            entry=variant.entry,
            options=replace(options, arch=arch),
        )
        res = run_job(job, GATE_TIMEOUT_S)
        if res.ok:
            return GateResult(
                True, f"builds as device code for {arch} ({res.toolchain})", toolchain=res.toolchain
            )
        if res.stage == "unavailable":
            missing.append(f"{arch}: {res.error}")
            continue
        return GateResult(
            False,
            f"does not build as device code for {arch} (a GPU compiler rejects it; nothing ran it): "
            f"{first_error(res.log) or res.error}",
            log=res.log,
            toolchain=res.toolchain,
        )
    return GateResult(
        False,
        "no GPU device compiler here to check that the code builds as device code, so it is not run: "
        + "; ".join(missing),
    )


def compile_check(target: str, source: str, entry: str, options: CompileOptions | None = None) -> GateResult:
    """Whether `source` (code in dialect `target`, with kernel `entry`) compiles with a real compiler
    here, compile-only and in a sandboxed child: for each arch the target's backends compile for
    without a device (HIP: gfx90a, gfx942), else with each backend that runs the dialect (an OpenCL
    runtime, the CPU emulator); the first compiler present decides.  ``ok`` False with the reason when
    it does not compile, or when no compiler here can tell."""
    from porter.backends import runners

    options = options or CompileOptions()
    attempts: list[tuple[str, CompileOptions]] = []
    for backend in runners(target):
        try:
            archs = list(get_backend(backend).compile_archs())
        except Exception:  # noqa: BLE001 - a backend that cannot be imported compiles nothing here
            continue
        attempts += [(backend, replace(options, arch=a)) for a in archs] or [(backend, options)]
    missing: list[str] = []
    for backend, opts in attempts:
        res = run_job(Job(backend=backend, source=source, entry=entry, options=opts), GATE_TIMEOUT_S)
        where = f"{backend}:{opts.arch}" if opts.arch else backend
        if res.ok:
            return GateResult(
                True, f"compiles for {where} ({res.toolchain})", log=res.log, toolchain=res.toolchain
            )
        if res.stage == "unavailable":
            missing.append(f"{where}: {res.error}")
            continue
        return GateResult(
            False,
            f"does not compile for {where}: {first_error(res.log) or res.error}",
            log=res.log,
            toolchain=res.toolchain,
        )
    return GateResult(
        False, "no compiler here for " + target + ("; " + "; ".join(missing) if missing else "")
    )


__all__ = ["GateResult", "compile_check", "device_build_check"]
