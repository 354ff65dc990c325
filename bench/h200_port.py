"""Ported variants on the NVIDIA H200: the original CUDA kernel beside its HIP and OpenCL translations.

Run on the machine with the H200 (tree-sitter wheels installed, CuPy and NVIDIA OpenCL present),
from the repository root:

    python bench/h200_port.py                          # every samples/cuda/*.cu, largest arrays 2^26
    python bench/h200_port.py --elements 16777216 samples/cuda/vector_add.cu

For each kernel (template instantiation) of each file: `porter port`'s translations (HIP, OpenCL),
then on the same GPU the original CUDA kernel (cuda backend), the HIP variant through HIP-on-CUDA
(hip backend) and the OpenCL variant on NVIDIA's OpenCL, each timed by porter.harness.bench
(device events after warm-up, L2 flush before every timed launch, rotated inputs, re-validated
against the original).  One Markdown row per kernel: the three medians and the ported variants'
speed as a fraction of the original's (original time / variant time; goals: HIP-on-NVIDIA >= 0.98x,
OpenCL >= 0.95x).  Paste the output into "Ported variants on the H200" in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import tempfile
from pathlib import Path

from porter.backends import Device, get_backend

from porter.defines import BuildFlags
from porter.harness.bench import BenchPlan, benchmark
from porter.harness.spec import scale_size
from porter.plan import Plan, Refusal, make_plan, reference_devices
from porter.results import BenchResult, PortReport
from porter.scan.instances import Instance
from porter.workflows.options import OutputOptions, RunOptions
from porter.workflows.port import port_file

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"hip": 0.98, "opencl": 0.95}


def _gpu(backend: str, cpu: bool = False) -> Device | None:
    """The NVIDIA GPU as seen by `backend`; with `cpu`, a CPU stand-in (to try the script anywhere)."""
    if cpu and backend in ("cuda", "hip"):
        backend = "cpu"
    try:
        devices = get_backend(backend).devices()
    except Exception:  # noqa: BLE001 - no runtime: no device
        return None
    if cpu:
        return next((d for d in devices if d.kind in ("cpu", "emulator")), None)
    return next((d for d in devices if d.kind == "gpu" and "NVIDIA" in d.name.upper()), None)


def _ms(r: BenchResult | None) -> str:
    if r is None:
        return "-"
    if not r.ok or r.timing is None:
        return f"failed: {' '.join(r.reason.split())[:80]}"
    return f"{r.timing.median_ms:.4f} (±{r.timing.iqr_ms:.4f})"


def _ratio(orig: BenchResult | None, variant: BenchResult | None, goal: float) -> str:
    if (
        orig is None
        or variant is None
        or not (orig.ok and variant.ok)
        or not (orig.timing and variant.timing)
    ):
        return "-"
    ratio = orig.timing.median_ms / variant.timing.median_ms
    return f"{ratio:.3f}x " + ("ok" if ratio >= goal else f"below {goal}x")


def _row(
    path: Path, plan: Plan, inst: Instance, report: PortReport, devices: dict[str, Device | None],
    elements: int, out: str,
) -> str:  # fmt: skip
    spec, why_no_spec = plan.spec_or_reason(inst)
    if spec is None:
        return f"| {path.name} | {inst.name} | - | no spec: {(why_no_spec or '').splitlines()[0][:100]} | | | | |"
    base = spec.bench_sizes[0] if spec.bench_sizes else (spec.sizes[0] if spec.sizes else {})
    size = scale_size(spec, base, elements)
    results: dict[str, BenchResult | None] = {}
    notes: dict[str, str] = {}
    cuda = devices["cuda"]
    reference = plan.reference(inst.base, report.targets, reference_devices())
    original = reference.original
    if cuda is not None and original is not None:
        results["cuda"] = benchmark(
            original, spec, cuda, size, BenchPlan(compile=reference.options), reference=reference
        )
    for target in ("hip", "opencl"):
        dev = devices[target]
        made = plan.variant_for(inst, target, dev, out_dir=out, path=report.outputs[target]) if dev else None
        if dev is None or made is None or (isinstance(made, Refusal) and made.stage != "device"):
            results[target] = None  # no such device here, or no variant (untranslatable, no translator)
            continue
        if isinstance(made, Refusal):  # e.g. warp shuffles on an OpenCL device without 32-wide sub-groups
            results[target] = None
            notes[target] = f"untranslatable here: {made.reason}"
            continue
        results[target] = benchmark(
            made.variant, spec, dev, size, BenchPlan(compile=made.compile), reference=reference,
            baseline=results.get("cuda"),
        )  # fmt: skip
    size_text = ", ".join(f"{k}={v}" for k, v in size.items())
    orig = results.get("cuda")
    cells = {
        t: (notes[t][:110], "-") if t in notes else (_ms(results[t]), _ratio(orig, results[t], GOALS[t]))
        for t in ("hip", "opencl")
    }
    return (
        f"| {path.name} | {inst.name} | {size_text} | {_ms(orig)} | {cells['hip'][0]} | {cells['hip'][1]} | "
        f"{cells['opencl'][0]} | {cells['opencl'][1]} |"
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="CUDA files (default: samples/cuda/*.cu)")
    ap.add_argument("--elements", type=int, default=1 << 26, help="elements in each kernel's largest array")
    ap.add_argument("-I", dest="include", action="append", default=[], help="include directory; repeatable")
    ap.add_argument(
        "--cpu", action="store_true", help="dry run on CPU stand-ins (emulator, PoCL); times mean nothing"
    )
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.files] or sorted((ROOT / "samples" / "cuda").glob("*.cu"))
    devices = {b: _gpu(b, args.cpu) for b in ("cuda", "hip", "opencl")}
    names = sorted({d.name for d in devices.values() if d is not None})
    print(f"Machine: {', '.join(names) or 'no GPU found'}; host {platform.node()}; {datetime.date.today()}")
    print(f"Command: `python bench/h200_port.py {' '.join(argv)}`")
    print(
        "Devices: " + ", ".join(f"{k}={d.label if d else 'none'}" for k, d in devices.items()) + "; "
        "ratio = original time / variant time (1.0x: as fast as the original CUDA kernel).\n"
    )
    if devices["cuda"] is None:
        print("no NVIDIA GPU with CuPy found: nothing measured", file=sys.stderr)
        return 1
    print(
        "| file | kernel | size | CUDA original ms (IQR) | HIP-on-NVIDIA ms | HIP ratio | "
        "OpenCL-on-NVIDIA ms | OpenCL ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for path in files:
        with tempfile.TemporaryDirectory(prefix="porter-h200-port-") as out:
            try:  # port's translations, written (HIP's headers beside them): the variants compile them
                plan = make_plan(str(path), "port", args.include)
                report = port_file(
                    str(path), ("hip", "opencl"), run=RunOptions(BuildFlags(tuple(args.include))),
                    output=OutputOptions(out), translate_only=True, plan=plan,
                )  # fmt: skip
                instances = plan.instances(report.targets)
            except Exception as err:  # noqa: BLE001 - one bad file must not lose the others' rows
                print(f"| {path.name} | - | - | not ported: {' '.join(str(err).split())[:100]} | | | | |")
                continue
            for inst in instances:
                try:
                    print(_row(path, plan, inst, report, devices, args.elements, out), flush=True)
                except Exception as err:  # noqa: BLE001
                    print(f"| {path.name} | {inst.name} | - | error: {type(err).__name__}: {err} | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
