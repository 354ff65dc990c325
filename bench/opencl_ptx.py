"""The PTX NVIDIA's OpenCL makes of porter's OpenCL translation beside the PTX nvcc makes of the CUDA original.

    OCL_ICD_VENDORS=/tmp/icd-nv python bench/opencl_ptx.py [--corpus .corpus] [--only lud,nw] --out DIR

Issue #30 asks why translated kernels trail the CUDA original on NVIDIA's OpenCL.  Timing says by how much;
the code each compiler makes says where.  For each program of bench/corpus_runs.toml (default: the ones the
kernel timings found slow), ``porter port --translate-only --to opencl`` translates it, porter's own OpenCL
build (the options it uses for a port, per-device defines included) compiles each ``.cl`` on the first
NVIDIA OpenCL device, and the program binary -- PTX on NVIDIA's OpenCL -- is written to
``DIR/<program>/<file>.ocl.ptx``; ``nvcc -ptx -arch=sm_XX`` writes the original's beside it
(``<file>.cuda.ptx``).  stdout: per kernel, counts of the instruction classes that usually explain a gap
(global/shared loads and stores, barriers, integer division, conversions, branches, fused multiply-adds,
special functions, total).  Not a test: nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from opencl_kernel_speed import kernel_files  # noqa: E402  (bench/ is not a package)

CLASSES = {  # instruction class: PTX opcode prefix pattern
    "ld.global": r"ld\.global",
    "ld.global.nc": r"ld\.global\.nc",
    "st.global": r"st\.global",
    "ld.shared": r"ld\.shared",
    "st.shared": r"st\.shared",
    "bar": r"(bar|barrier)\.",
    "membar/fence": r"(membar|fence)\.",
    "div/rem": r"(div|rem)\.",
    "cvt": r"cvt\.",
    "branch": r"@?%?\w*\s*bra",
    "fma": r"fma\.",
    "sfu": r"(ex2|lg2|sin|cos|rsqrt|sqrt|rcp)\.",
    "mul.wide": r"mul\.wide",
}
ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+(\w+)", re.M)


def kernels(ptx: str) -> dict[str, str]:
    """Each ``.entry``'s body text in a PTX module."""
    out: dict[str, str] = {}
    starts = [(m.start(), m.group(1)) for m in ENTRY.finditer(ptx)]
    for i, (at, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        out[name] = ptx[at:end]
    return out


def counts(body: str) -> dict[str, int]:
    lines = [ln.strip() for ln in body.splitlines()]
    code = [
        ln
        for ln in lines
        if ln and not ln.startswith(("//", ".", "{", "}", "(", ")", "$")) and not ln.endswith(":")
    ]
    c = collections.Counter()
    for ln in code:
        op = re.sub(r"^@!?%\w+\s+", "", ln)
        for name, pattern in CLASSES.items():
            if re.match(pattern, op):
                c[name] += 1
    c["total"] = len(code)
    return dict(c)


def short(name: str) -> str:
    """A C++-mangled CUDA entry's plain name (``_Z12lud_diagonalPfii`` -> ``lud_diagonal``)."""
    m = re.match(r"_Z(\d+)(\w+)", name)
    if m:
        n = int(m.group(1))
        return m.group(2)[:n]
    return name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--only", default="backprop,lud,nw,pathfinder,srad")
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", default="", help="nvcc's -arch (default: the OpenCL device's sm_XX)")
    ap.add_argument("--device", default="NVIDIA", help="the OpenCL device: a part of its platform or name")
    args = ap.parse_args()

    from porter.backends import CompileOptions, get_backend

    backend = get_backend("opencl")
    want = args.device.upper()
    nvidia = [d for d in backend.devices() if want in (d.platform + d.name).upper() and d.kind != "checker"]
    if not nvidia:
        print(f"no {args.device} OpenCL device here (NVIDIA's: see ../shared/gpu/README.md)", file=sys.stderr)
        return 2
    device = nvidia[0]
    arch = args.arch or (device.arch if device.arch.startswith("sm_") else "sm_90")
    corpus = Path(args.corpus).resolve()
    table = tomllib.loads((HERE / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"]
    out = Path(args.out)
    print(f"device: {device.label} ({device.arch}); nvcc -arch={arch}\n")
    print("| program | kernel | side | " + " | ".join([*CLASSES, "total"]) + " |")
    print("|---|---|---|" + "---:|" * (len(CLASSES) + 1))
    for name in [w for w in args.only.split(",") if w]:
        entry = table[name]
        folder = corpus / entry["path"]
        includes = [str(corpus / i) for i in entry.get("include", [])]
        work = out / name
        work.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "porter", "port", str(folder), "--to", "opencl", "--translate-only"]
        cmd += [a for i in includes for a in ("-I", i)] + ["--out", str(work / "port")]
        subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sides: dict[str, dict[str, str]] = {"cuda": {}, "opencl": {}}
        for cl in sorted((work / "port" / "opencl").rglob("*.cl")):
            source = cl.read_text(encoding="utf-8", errors="replace")
            first = re.search(r"__kernel\s+void\s+(\w+)", source)
            if not first:
                continue
            try:
                binary = backend.compile(
                    source, first.group(1), CompileOptions(include_dirs=(str(cl.parent),)), device
                )
            except Exception as err:  # a build failure is a row, not a stop
                print(f"| {name} | {cl.name} | opencl | build failed: {str(err).splitlines()[0][:120]} |")
                continue
            ptx = binary.data.decode("utf-8", "replace")
            (work / f"{cl.stem}.ocl.ptx").write_text(ptx, encoding="utf-8")
            sides["opencl"].update(kernels(ptx))
        for cu in kernel_files(folder):
            target = work / f"{cu.stem}.cuda.ptx"
            nv = ["nvcc", "-ptx", f"-arch={arch}", "-w", "-x", "cu", str(cu), "-o", str(target)]
            nv += [f"-I{i}" for i in [*includes, str(cu.parent)]]
            proc = subprocess.run(nv, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                print(
                    f"| {name} | {cu.name} | cuda | nvcc failed: {proc.stderr.strip().splitlines()[-1][:120]} |"
                )
                continue
            sides["cuda"].update({short(k): v for k, v in kernels(target.read_text()).items()})
        for kernel in sorted(set(sides["cuda"]) | set(sides["opencl"])):
            for side in ("cuda", "opencl"):
                body = sides[side].get(kernel)
                if body is None:
                    continue
                c = counts(body)
                cells = " | ".join(str(c.get(k, 0)) for k in [*CLASSES, "total"])
                print(f"| {name} | {kernel} | {side} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
