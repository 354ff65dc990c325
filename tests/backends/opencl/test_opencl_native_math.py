"""CUDA's fast-math intrinsics on OpenCL (issue #30): the translation writes a porter_fast_* macro for each, the
full-precision OpenCL function unless the build defines PORTER_NATIVE_MATH, which porter's two builds (pyopencl's
kernel builds, porter_opencl.h's build of a port's .cl) define only for the devices dialect.toml's
[facts.native_math] names: GPUs whose native_ functions are the approximations CUDA's intrinsics use, never a CPU
runtime (where native_ has no bound: Intel's put BlackScholes far outside CUDA's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opencl_launch import launch_translated
from porter.backends.opencl import requirements
from porter.backends.opencl.requirements import Capabilities
from porter.backends.opencl.translate import tables, translate_to_opencl

ROOT = Path(__file__).resolve().parents[3]
DEFINE = "PORTER_NATIVE_MATH"

# CUDA intrinsic -> (arguments, the macro the translation calls, the native_ function it is where DEFINE is set)
INTRINSICS = {
    "__expf": ("x", "porter_fast_exp", "native_exp"),
    "__exp10f": ("x", "porter_fast_exp10", "native_exp10"),
    "__logf": ("x", "porter_fast_log", "native_log"),
    "__log2f": ("x", "porter_fast_log2", "native_log2"),
    "__log10f": ("x", "porter_fast_log10", "native_log10"),
    "__powf": ("x, 1.5f", "porter_fast_pow", "native_powr"),
    "__sinf": ("x", "porter_fast_sin", "native_sin"),
    "__cosf": ("x", "porter_fast_cos", "native_cos"),
    "__tanf": ("x", "porter_fast_tan", "native_tan"),
    "__fdividef": ("x, 3.0f", "porter_fast_divide", "native_divide"),
}

PROGRAM = r"""#include <cstdio>
#include <cuda_runtime.h>

__global__ void fast(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[5 * i + 0] = __expf(x[i]);
        out[5 * i + 1] = __logf(x[i]);
        out[5 * i + 2] = __powf(x[i], 1.5f);
        out[5 * i + 3] = __fdividef(x[i], 3.0f);
        out[5 * i + 4] = __sinf(x[i]);
    }
}

int main() {
    const int n = 64;
    float hx[n], ho[5 * n];
    for (int i = 0; i < n; ++i) hx[i] = 0.25f + 0.125f * i;
    float *dx, *dout;
    cudaMalloc(&dx, sizeof hx);
    cudaMalloc(&dout, sizeof ho);
    cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
    fast<<<1, 64>>>(dx, dout, n);
    cudaMemcpy(ho, dout, sizeof ho, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i)
        printf("%.9g %.9g %.9g %.9g %.9g %.9g\n", hx[i], ho[5 * i], ho[5 * i + 1], ho[5 * i + 2], ho[5 * i + 3],
               ho[5 * i + 4]);
    return 0;
}
"""
N = 64
X = (0.25 + 0.125 * np.arange(N)).astype(np.float32)

FLAG = f"""
__kernel void native_flag(__global int* out) {{
#if defined({DEFINE})
    out[0] = 1;
#else
    out[0] = 0;
#endif
}}
"""


# --------------------------------------------------------------------------- translation


@pytest.mark.parametrize("name", sorted(INTRINSICS))
def test_each_fast_math_intrinsic_becomes_its_porter_macro(name: str) -> None:
    args, macro, native = INTRINSICS[name]
    src = f"__global__ void k(const float* in, float* out) {{ float x = in[0]; out[0] = {name}({args}); }}\n"
    text = translate_to_opencl(src, "k.cu").text
    body = text.split("__kernel", 1)[1]
    assert f"{macro}(" in body and name not in text
    # the prelude defines it both ways: native_ only where the build defines PORTER_NATIVE_MATH
    native_part, full_part = text.split(f"#if defined({DEFINE})", 1)[1].split("#else", 1)
    full_part = full_part.split("#endif", 1)[0]
    assert re.search(rf"#define {macro}\([^)]*\) {native}\(", native_part), native_part
    assert f"#define {macro}(" in full_part and "native_" not in full_part
    # and only the macros the code names
    assert text.count("#define porter_fast_") == 2


def test_a_translation_without_fast_math_defines_no_macros() -> None:
    src = "__global__ void k(const float* in, float* out) { out[0] = expf(in[0]) + logf(in[1]); }\n"
    text = translate_to_opencl(src, "k.cu").text
    assert "porter_fast_" not in text and DEFINE not in text


def test_every_intrinsic_mapped_to_a_macro_has_one_in_the_table() -> None:
    t = tables()
    heads = {h.split("(")[0] for h in t["fast_math"]}
    named = {v for v in t["functions"].values() if str(v).startswith("porter_fast_")}
    assert named <= heads and {m for _, m, _ in INTRINSICS.values()} <= heads
    assert all(str(native).startswith("native_") for _, native in t["fast_math"].values())


# --------------------------------------------------------------------------- the device rule


@pytest.mark.parametrize(
    ("device_type", "vendor", "native"),
    [
        ("gpu", "NVIDIA Corporation", True),
        ("gpu", "Advanced Micro Devices, Inc.", True),
        ("gpu", "AMD", True),
        ("gpu", "Intel(R) Corporation", False),
        ("cpu", "Intel(R) Corporation", False),  # Intel's CPU runtime
        ("cpu", "GenuineIntel", False),  # PoCL on an Intel CPU
        ("cpu", "AuthenticAMD", False),  # PoCL on an AMD CPU
        ("cpu", "NVIDIA Corporation", False),
        ("accelerator", "NVIDIA Corporation", False),
        ("", "", False),  # nothing known (the checker, a device not reachable here)
    ],
)
def test_native_math_is_for_the_gpus_the_table_names(device_type: str, vendor: str, native: bool) -> None:
    """A stand-in device description: the rule reads only its type and vendor."""
    caps = Capabilities(device_type=device_type, vendor=vendor)
    assert requirements.native_math(caps) is native
    assert (f"-D{DEFINE}" in requirements.device_defines(caps)) is native


def test_native_math_keeps_the_disabled_kernels_define() -> None:
    caps = Capabilities(
        extensions=frozenset({"cl_intel_required_subgroup_size"}),
        device_type="gpu",
        vendor="NVIDIA Corporation",
    )
    assert requirements.device_defines(caps) == ("-DPORTER_NO_SUBGROUP_32", f"-D{DEFINE}")


def test_the_program_runtime_gets_the_same_rule() -> None:
    """porter_opencl.h applies the rule from the port's generated sources header, written from the same table."""
    from porter.backends.opencl.program import native_math_source, sources_header

    rule = requirements.native_math_rule()
    assert rule["define"] == DEFINE and rule["device_types"] == ["gpu"]
    text = native_math_source()
    assert f'porter_native_math_define[] = "{DEFINE}"' in text
    assert "porter_native_math_types = 0x4;" in text  # CL_DEVICE_TYPE_GPU
    assert "{" + ", ".join(f'"{v}"' for v in rule["vendors"]) + "}" in text
    assert f"porter_native_math_vendor_count = {len(rule['vendors'])};" in text
    assert text in sources_header(Path("/nonexistent"), {})


# --------------------------------------------------------------------------- both builds, on devices


def _backend() -> Any:
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from porter.backends import get_backend

    return get_backend("opencl")


def _devices(kind: str) -> list[Any]:
    return [d for d in _backend().devices() if d.kind == kind]


def _caps(device: Any) -> Capabilities:
    from porter.backends.opencl.devices import capabilities

    return capabilities(device)


def _pyopencl_native(device: Any) -> tuple[bool, tuple[str, ...]]:
    """Whether pyopencl's build of a kernel for `device` defines PORTER_NATIVE_MATH (asked of the compiler), and
    the options it was built with."""
    backend = _backend()
    binary = backend.compile(FLAG, "native_flag", device=device)
    out = backend.to_device(np.full(1, -1, np.int32), device)
    backend.load(binary, device)(out, grid=(1,), block=(1,))
    backend.synchronize(device)
    flag = int(backend.to_host(out, np.int32, (1,))[0])
    assert flag in (0, 1)
    return bool(flag), tuple(binary.meta["options"])


def _translated_results(device: Any) -> np.ndarray:
    """The program's kernel, translated and run on `device` through pyopencl (porter's kernel replays)."""
    text = translate_to_opencl(PROGRAM, "main.cu")
    kernel = next(k for k in text.kernels if k.name == "fast")
    out = np.full(5 * N, np.nan, np.float32)
    _, got = launch_translated(_backend(), device, text.text, kernel, [X, out, np.int32(N)], (1,), (N,))
    return np.asarray(got).reshape(N, 5)


def _port(tmp_path: Path) -> Path:
    """The program ported to OpenCL (its tree: host code with stubs, main.cl)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.cu").write_text(PROGRAM, encoding="utf-8")
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "porter", "port", str(src), "--to", "opencl", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    tree = out / "opencl"
    assert (tree / "main.cl").is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    return tree


def _run_program(tree: Path, device: Any, where: Path) -> tuple[str, np.ndarray]:
    """The port built with porter_opencl.h for `device` and run there: the build options porter's runtime used
    for main.cl (PORTER_OPENCL_VERBOSE), and what the program printed."""
    from porter.backends.opencl.program import program_toolchains
    from porter.backends.programs import ProgramSource

    chain = next(c for c in program_toolchains([device]))
    built = chain.build(ProgramSource(tree, ("main.cu",), language="opencl", capture=False), where)
    assert built.ok, built.reason + built.log[-3000:]
    # the ICD loader's registry as this process has it (the GPU machine registers NVIDIA's OpenCL through
    # OCL_ICD_VENDORS; porter's own runs pass these through its jail's environment alike)
    icd = {
        k: v for k, v in os.environ.items() if k in ("OCL_ICD_VENDORS", "OCL_ICD_FILENAMES", "POCL_DEVICES")
    }
    env = {**icd, **built.env, "PORTER_OPENCL_VERBOSE": "1", "PATH": "/usr/bin:/bin"}
    ran = subprocess.run([built.executables["main.cu"]], capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    said = re.search(r'building main\.cl with options "([^"]*)"', ran.stderr)
    assert said, ran.stderr
    rows = np.array([[float(v) for v in line.split()] for line in ran.stdout.split("\n") if line.strip()])
    assert rows.shape == (N, 6) and np.array_equal(rows[:, 0].astype(np.float32), X)
    return said.group(1), rows[:, 1:].astype(np.float32)


def _assert_full_precision(got: np.ndarray) -> None:
    """Within OpenCL's full-precision bounds (ulp of the float result): exp and log 3, pow 16, division 2.5,
    sin 4 -- which native_ functions need not meet."""
    x = X.astype(np.float64)
    want = np.stack([np.exp(x), np.log(x), x**1.5, x / 3.0, np.sin(x)], axis=1)
    ulps = np.array([3, 3, 16, 2.5, 4])
    err = np.abs(got.astype(np.float64) - want)
    bound = ulps * np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    bad = np.argwhere(err > bound)
    assert bad.size == 0, [(float(x[i]), j, float(got[i, j]), float(want[i, j])) for i, j in bad[:5]]


@pytest.mark.integration
def test_cpu_devices_build_fast_math_with_full_precision_in_both_builds(tmp_path: Path) -> None:
    cpus = _devices("cpu")
    if not cpus:
        pytest.skip("no CPU OpenCL device (apt-get install pocl-opencl-icd)")
    tree = _port(tmp_path) if shutil.which("g++") else None
    for n, device in enumerate(cpus):
        assert not requirements.native_math(_caps(device)), device.label
        native, options = _pyopencl_native(device)
        assert not native and f"-D{DEFINE}" not in options, (device.label, options)
        _assert_full_precision(_translated_results(device))
        if tree is not None:
            used, printed = _run_program(tree, device, tmp_path / f"build{n}")
            assert DEFINE not in used and "-cl-mad-enable" in used, (device.label, used)
            _assert_full_precision(printed)


@pytest.mark.integration
def test_both_builds_apply_one_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in rule naming this CPU device: pyopencl's build and porter_opencl.h's both define the macro there
    (the two implementations of the rule agree), and with the real rule neither does."""
    cpus = [d for d in _devices("cpu") if _caps(d).vendor]
    if not cpus:
        pytest.skip("no CPU OpenCL device (apt-get install pocl-opencl-icd)")
    if not shutil.which("g++"):
        pytest.skip("g++ is not installed")
    device = cpus[0]
    tree = _port(tmp_path)
    rule = {"define": DEFINE, "device_types": ["cpu"], "vendors": [_caps(device).vendor[:5]]}
    monkeypatch.setattr(requirements, "native_math_rule", lambda: rule)
    native, options = _pyopencl_native(device)
    assert native and f"-D{DEFINE}" in options
    used, _ = _run_program(tree, device, tmp_path / "stand-in")
    assert f"-D{DEFINE}" in used, used
    monkeypatch.setattr(requirements, "native_math_rule", lambda: dict(rule, device_types=["gpu"]))
    assert not _pyopencl_native(device)[0]
    used, _ = _run_program(tree, device, tmp_path / "real")
    assert DEFINE not in used, used


@pytest.mark.gpu
def test_nvidia_opencl_gpus_build_fast_math_as_native_functions(tmp_path: Path) -> None:
    nvidia = [d for d in _devices("gpu") if _caps(d).vendor.startswith("NVIDIA")]
    if not nvidia:
        pytest.skip("no NVIDIA OpenCL GPU (register libnvidia-opencl.so.1 with the ICD loader)")
    device = nvidia[0]
    assert f"-D{DEFINE}" in requirements.device_defines(_caps(device))
    native, options = _pyopencl_native(device)
    assert native and f"-D{DEFINE}" in options, options
    # CUDA's own intrinsics are approximations too: close, not full precision
    x = X.astype(np.float64)
    want = np.stack([np.exp(x), np.log(x), x**1.5, x / 3.0, np.sin(x)], axis=1)
    np.testing.assert_allclose(_translated_results(device), want, rtol=1e-4, atol=1e-5)
    if shutil.which("g++"):
        used, printed = _run_program(_port(tmp_path), device, tmp_path / "build")
        assert f"-D{DEFINE}" in used, used
        np.testing.assert_allclose(printed, want, rtol=1e-4, atol=1e-5)
