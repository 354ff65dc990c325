"""Compiling device-only CUDA C++ with ``nvcc -cubin`` / ``nvcc -ptx`` (when NVRTC is missing, or asked for).

nvcc has no name expressions: for a template entry (``axpby<float>``) a host function taking the
kernel's address is appended, which instantiates it, and the lowered name is found among the
entries nvcc produced by demangling them (c++filt / llvm-cxxfilt) and comparing with the entry.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from porter.backends import CompileError, ToolchainMissing, identifiers
from porter.backends.cuda import ptxas
from porter.backends.cuda.nvrtc import SOURCE_NAME, Compiled
from porter.backends.cuda.toolchain import nvcc_path

_PTX_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)")


def nvcc_options(
    arch: str,
    output: str,
    *,
    include_dirs: Sequence[str],
    defines: Sequence[str],
    flags: Sequence[str],
    debug: bool,
    report: bool,
) -> list[str]:
    if output == "cubin":
        opts = ["-cubin", f"-arch={arch}"]
    else:
        opts = ["-ptx", f"-arch={arch.replace('sm_', 'compute_', 1)}"]
    if report and output == "cubin":
        opts += ["-Xptxas", "-v"]
    if debug:
        opts.append("-G")
    opts += [f"-D{d}" for d in defines]
    opts += [f"-I{d}" for d in include_dirs]
    opts += list(flags)
    return opts


def _demangle(names: list[str]) -> list[str]:
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt") or shutil.which("llvm-cxxfilt-19")
    if tool is None or not names:
        return names
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return names
    lines = out.stdout.splitlines()
    return lines if len(lines) == len(names) else names


def _plain(name: str) -> str:
    """'void axpby<float>(int, float, ...)' -> 'axpby<float>' (spaces removed)."""
    head = name.split("(", 1)[0].strip()
    if head.startswith("void "):
        head = head[len("void ") :]
    return head.replace(" ", "")


def lowered_entry(entry: str, candidates: list[str]) -> str | None:
    """The candidate symbol that is `entry` (extern "C" name, or a mangled C++ name that demangles to it)."""
    entry = identifiers.symbol(entry)  # k\u00e9rnel is the symbol kérnel
    if entry in candidates:
        return entry
    wanted = entry.replace(" ", "")
    for mangled, demangled in zip(candidates, _demangle(candidates), strict=True):
        if _plain(demangled) == wanted:
            return mangled
    # the Itanium ABI counts a name's bytes (UTF-8), and the demanglers give up on non-ASCII names
    base = entry.split("<", 1)[0].split("::")[-1].strip()
    tagged = [c for c in candidates if f"{len(base.encode('utf-8'))}{base}" in c]
    return tagged[0] if len(tagged) == 1 else None


def compile_source(
    source: str, entry: str, options: Sequence[str], output: str, *, backend: str = "cuda"
) -> Compiled:
    nvcc = nvcc_path()
    if nvcc is None:
        raise ToolchainMissing(
            "nvcc not found: install the CUDA toolkit, or pip install 'porter-gpu[cuda]' for NVRTC"
        )
    text = source
    if "<" in entry:
        text += f"\nstatic void __porter_instantiate_entry() {{ (void)&{entry}; }}\n"
    with tempfile.TemporaryDirectory(prefix="porter-nvcc-") as tmp:
        src = Path(tmp, SOURCE_NAME)
        out = Path(tmp, f"kernel.{output}")
        src.write_text(text, encoding="utf-8", errors="surrogateescape")
        cmd = [nvcc, *options, "-o", str(out), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise CompileError(backend, f"nvcc did not finish: {err}", source, cmd[1:], entry) from err
        log = (proc.stdout + proc.stderr).replace(str(src), SOURCE_NAME)
        if proc.returncode != 0 or not out.is_file():
            raise CompileError(backend, log or f"nvcc exited with {proc.returncode}", source, cmd[1:], entry)
        data = out.read_bytes()
    ptx = data.decode("utf-8", "replace") if output == "ptx" else ""
    candidates = _PTX_ENTRY.findall(ptx) if output == "ptx" else ptxas.entries(log)
    if not candidates and output == "cubin":
        candidates = _cubin_symbols(data)
    if not entry:  # compile only, no kernel looked up (template kernels no launch instantiates)
        return Compiled(data=data, entry="", log=log, ptx=ptx)
    name = lowered_entry(entry, candidates)
    if name is None:
        raise CompileError(
            backend, f"{log}\nentry {entry!r} not found among {candidates}", source, cmd[1:], entry
        )
    return Compiled(data=data, entry=name, log=log, ptx=ptx)


def _cubin_symbols(data: bytes) -> list[str]:
    """Kernel names from the cubin's '.nv.info.<name>' sections (when ptxas printed no report)."""
    found = re.findall(rb"\.nv\.info\.([A-Za-z_$][\w$]*)", data)
    return list(dict.fromkeys(name.decode() for name in found))
