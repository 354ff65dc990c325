"""Compiling HIP device code for AMD GPUs to a code object (hsaco), with clang's resource report.

Two drivers (both always device-only, ``--cuda-device-only --no-gpu-bundle-output``):

* ``hipcc`` (``HIP_PLATFORM=amd``; Debian's hipcc 5.2 wraps clang 15): one step.
* a newer ``clang`` (clang-19 here) for targets hipcc's clang lacks, such as gfx942, in three
  steps because the matching ld.lld may be missing: ``clang -S`` (HIP headers from the ROCm path,
  ROCm device libraries linked as bitcode) -> ``clang -c`` the assembly -> ``ld.lld -shared``.
  When the device libraries lack ``oclc_isa_version_<n>.bc`` for the target, porter builds that
  one-constant library from toolchains.toml into an overlay directory of symbolic links.

The report comes from ``-Rpass-analysis=kernel-resource-usage``: per kernel the VGPRs (->
registers), LDS bytes (-> shared_bytes), scratch bytes per lane (-> stack_bytes) and spilled
SGPR+VGPR counts (-> spill_stores; AMD reports registers spilled, not bytes).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from porter.backends import CompileError, ResourceReport, ToolchainMissing, load_data
from porter.backends.cuda.nvcc import lowered_entry


@cache
def settings() -> dict[str, Any]:
    return load_data("porter.backends.hip", "toolchains.toml")


@dataclass(frozen=True)
class AmdCompiled:
    data: bytes
    entry: str
    log: str
    report: ResourceReport | None
    command: tuple[str, ...]


# ---------------------------------------------------------------------------- discovery


def _which(names: Sequence[str]) -> str | None:
    for name in names:
        found = shutil.which(name) if "/" not in name else (name if os.access(name, os.X_OK) else None)
        if found:
            return found
    return None


@cache
def hipcc_path() -> str | None:
    return _which(settings()["hipcc"]["names"])


@cache
def clang_path() -> str | None:
    return _which(settings()["clang"]["names"])


@cache
def lld_path() -> str | None:
    return _which(settings()["clang"]["lld"])


def _run_version(cmd: list[str], env: dict[str, str] | None = None) -> str:
    from porter.toolcache import tool_output

    return tool_output(cmd, env)[1]


@cache
def hipcc_version() -> str | None:
    """'hip-5.2.21153-clang-15.0.6' from hipcc --version, else None."""
    path = hipcc_path()
    if path is None:
        return None
    text = _run_version([path, "--version"], {**os.environ, **settings()["hipcc"]["env"]})
    hip = re.search(r"HIP version:\s*(\S+)", text)
    clang = re.search(r"clang version (\S+)", text)
    if not hip and not clang:
        return None
    return f"hip-{hip.group(1) if hip else '?'}-clang-{clang.group(1) if clang else '?'}"


@cache
def clang_version() -> str | None:
    path = clang_path()
    if path is None:
        return None
    match = re.search(r"clang version (\S+)", _run_version([path, "--version"]))
    return match.group(1) if match else None


@cache
def rocm_path() -> str | None:
    for root in settings()["clang"]["rocm_paths"]:
        if Path(root, "include", "hip", "hip_runtime.h").is_file():
            return root
    return None


@cache
def device_lib_dir() -> str | None:
    for path in settings()["clang"]["device_lib_dirs"]:
        if Path(path, "ocml.bc").is_file():
            return path
    return None


def compilers_for(arch: str) -> list[str]:
    """Usable drivers for `arch`, preferred first."""
    found = []
    if hipcc_path() and hipcc_version() and arch in settings()["hipcc"]["archs"]:
        found.append("hipcc")
    if clang_path() and lld_path() and device_lib_dir() and arch in settings()["clang"]["archs"]:
        found.append("clang")
    return found


def version_of(compiler: str) -> str:
    if compiler == "hipcc":
        return f"hipcc:{hipcc_path()}:{hipcc_version()}"
    return f"clang:{clang_path()}:{clang_version()}+lld:{lld_path()}"


# ---------------------------------------------------------------------------- resource report

_FUNCTION = re.compile(r"remark: Function Name: (\S+)")
_FIELD = re.compile(r"remark:\s+([A-Za-z][A-Za-z ]*?(?: \[[^\]]+\])?): (\d+)")


def parse_remarks(log: str) -> dict[str, dict[str, int]]:
    """{kernel: {"VGPRs": 4, "LDS Size [bytes/block]": 256, ...}} from the resource-usage remarks."""
    kernels: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        match = _FUNCTION.search(line)
        if match:
            current = kernels.setdefault(match.group(1), {})
            continue
        match = _FIELD.search(line)
        if match and current is not None:
            current[match.group(1).strip()] = int(match.group(2))
    return kernels


def report_for(log: str, entry: str) -> ResourceReport | None:
    kernels = parse_remarks(log)
    if not kernels:
        return None
    name = entry if entry in kernels else next(iter(kernels))
    fields = kernels[name]
    spills = [fields[k] for k in ("SGPRs Spill", "VGPRs Spill") if k in fields]
    raw = f"{name}: " + ", ".join(f"{k}={v}" for k, v in fields.items())
    return ResourceReport(
        registers=fields.get("VGPRs"),
        shared_bytes=fields.get("LDS Size [bytes/block]"),
        spill_stores=sum(spills) if spills else None,
        spill_loads=None,
        stack_bytes=fields.get("ScratchSize [bytes/lane]"),
        raw=raw,
    )


# ---------------------------------------------------------------------------- compile


def _common(
    arch: str, include_dirs: Sequence[str], defines: Sequence[str], flags: Sequence[str], debug: bool
) -> list[str]:
    opts = [
        "-x",
        "hip",
        f"--offload-arch={arch}",
        "--cuda-device-only",
        "-Rpass-analysis=kernel-resource-usage",
    ]
    if not any(f.startswith("-O") for f in flags):
        opts.append("-O0" if debug else "-O3")
    if debug:
        opts.append("-g")
    opts += [f"-D{d}" for d in defines]
    opts += [f"-I{d}" for d in include_dirs]
    opts += list(flags)
    return opts


def _run(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def _device_libs(arch: str, tmp: str, clang: str) -> str:
    """A device-library directory holding oclc_isa_version_<n>.bc for `arch` (an overlay if needed)."""
    libs = device_lib_dir()
    assert libs is not None
    isa = f"oclc_isa_version_{arch.removeprefix('gfx')}.bc"
    if Path(libs, isa).is_file():
        return libs
    version = settings()["clang"]["isa_version"].get(arch)
    if version is None:
        raise ToolchainMissing(
            f"hip: the ROCm device libraries in {libs} lack {isa} and porter has no ISA version for {arch}"
        )
    overlay = Path(tmp, "devlibs")
    overlay.mkdir()
    for item in Path(libs).glob("*.bc"):
        (overlay / item.name).symlink_to(item)
    spec = settings()["clang"]["isa_library"]
    ll = Path(tmp, "isa.ll")
    ll.write_text(spec["template"].format(datalayout=spec["datalayout"], version=version), encoding="utf-8")
    proc = _run(
        [
            clang,
            "-target",
            "amdgcn-amd-amdhsa",
            "-nogpulib",
            "-c",
            "-emit-llvm",
            str(ll),
            "-o",
            str(overlay / isa),
        ],
        tmp,
    )
    if proc.returncode != 0:
        raise ToolchainMissing(f"hip: could not build {isa}: {proc.stderr.strip()}")
    return str(overlay)


_KERNEL_DIRECTIVE = re.compile(r"^(\s*\.amdhsa_kernel\s+)([^\s\"]+)[ \t]*$", re.MULTILINE)


def _quote_kernel_names(asm: Path) -> None:
    """Quote the symbol of each ``.amdhsa_kernel`` directive that is not a plain identifier: clang
    writes a Unicode kernel's (``_Z7kérnelPfi``) bare there, and its own assembler then refuses it."""
    if not asm.is_file():
        return
    text = asm.read_text(encoding="utf-8", errors="surrogateescape")
    quoted = _KERNEL_DIRECTIVE.sub(
        lambda m: m.group(0) if m.group(2).isascii() else f'{m.group(1)}"{m.group(2)}"', text
    )
    if quoted != text:
        asm.write_text(quoted, encoding="utf-8", errors="surrogateescape")


def compile_source(
    source: str,
    entry: str,
    *,
    shown_source: str | None = None,
    arch: str,
    compiler: str,
    include_dirs: Sequence[str] = (),
    defines: Sequence[str] = (),
    flags: Sequence[str] = (),
    debug: bool = False,
) -> AmdCompiled:
    """Compile `source` for `arch` with `compiler` ("hipcc" | "clang"); raises CompileError with the log
    and `shown_source` (default: `source`) numbered.  An empty `entry`: compile only, no kernel looked up
    (a unit whose template kernels no launch instantiates)."""
    text = source
    source = shown_source if shown_source is not None else source
    if "<" in entry:  # instantiate the template kernel the way host code would
        text += f"\nstatic void __porter_instantiate_entry() {{ (void)&{entry}; }}\n"
    opts = _common(arch, include_dirs, defines, flags, debug)
    with tempfile.TemporaryDirectory(prefix="porter-hip-") as tmp:
        src = Path(tmp, "kernel.hip")
        src.write_text(text, encoding="utf-8", errors="surrogateescape")
        out = Path(tmp, "kernel.hsaco")
        if compiler == "hipcc":
            hipcc = hipcc_path()
            if hipcc is None:
                raise ToolchainMissing(settings()["hints"]["compile"])
            cmd = [hipcc, *opts, "--no-gpu-bundle-output", "-c", "-o", str(out), str(src)]
            steps = [cmd]
            env = {**os.environ, **settings()["hipcc"]["env"]}
        else:
            clang, lld = clang_path(), lld_path()
            if clang is None or lld is None or device_lib_dir() is None:
                raise ToolchainMissing(settings()["hints"]["compile"])
            libs = _device_libs(arch, tmp, clang)
            rocm = [f"--rocm-path={rocm_path()}"] if rocm_path() else []
            asm, obj = Path(tmp, "kernel.s"), Path(tmp, "kernel.o")
            cmd = [clang, *opts, *rocm, f"--rocm-device-lib-path={libs}", "-S", "-o", str(asm), str(src)]
            steps = [
                cmd,
                [clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-c", str(asm), "-o", str(obj)],
                [lld, "-shared", str(obj), "-o", str(out)],
            ]
            env = None
        logs = []
        for step in steps:
            if len(steps) > 1 and step is steps[1]:  # clang's assembly, before its assembler reads it
                _quote_kernel_names(Path(tmp, "kernel.s"))
            try:
                proc = _run(step, tmp, env)
            except (OSError, subprocess.TimeoutExpired) as err:
                raise CompileError("hip", f"{step[0]} did not finish: {err}", source, cmd[1:], entry) from err
            logs.append((proc.stdout + proc.stderr).replace(str(src), "kernel.hip"))
            if proc.returncode != 0:
                raise CompileError("hip", "\n".join(logs), source, step[1:], entry)
        log = "\n".join(logs)
        data = out.read_bytes()
    kernels = list(parse_remarks(log))
    if not entry:  # a compile check of a unit whose kernels no launch instantiates: it compiled
        return AmdCompiled(data=data, entry="", log=log, report=None, command=tuple(cmd))
    name = lowered_entry(entry, kernels)
    if name is None:
        raise CompileError(
            "hip", f"{log}\nentry {entry!r} not found among kernels {kernels}", source, cmd[1:], entry
        )
    return AmdCompiled(data=data, entry=name, log=log, report=report_for(log, name), command=tuple(cmd))
