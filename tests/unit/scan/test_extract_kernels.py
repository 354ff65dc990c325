"""device_code(source, kernels=...): only what the named kernels reach survives, line numbers kept."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from porter.backends import CompileOptions, get_backend

from porter.scan.extract import device_code, referenced_globals

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"

SOURCE = """\
#include <cstdio>
#define N 1024
#define TAP(k) taps[k]
struct Pair { float a, b; };
__constant__ float taps[3];
__constant__ float unused_table[8];
__device__ int counter;
texture<float, 1, cudaReadModeElementType> tex_in;
__device__ float fetch(int i) { return tex1Dfetch(tex_in, i); }
__device__ float sq(float x) { return x * x; }
__device__ float twice(float x) { return 2.0f * sq(x); }
namespace ns {
template <typename T> __global__ void axpby(T* p) { p[threadIdx.x] = twice(TAP(0)); }
}
__global__ void tex_kernel(float* out) { out[threadIdx.x] = fetch(threadIdx.x); atomicAdd(&counter, 1); }
extern "C" __global__ void other(float* p) { p[0] = N + unused_table[0]; }
int main() { return 0; }
"""


def _kept(text: str) -> str:
    return " ".join(text.split())


def test_unnamed_kernels_and_what_only_they_use_are_blanked() -> None:
    out = device_code(SOURCE, kernels=["ns::axpby<float>"])
    assert out.count("\n") == SOURCE.count("\n")  # line numbers unchanged
    lines = out.split("\n")
    assert lines[12].startswith("template <typename T> __global__ void axpby")  # same line as in SOURCE
    flat = _kept(out)
    # reached: through the call chain (twice -> sq) and through a macro body (TAP -> taps)
    for kept in ("__constant__ float taps[3];", "float sq(", "float twice(", "#define TAP(k)", "struct Pair"):
        assert kept in flat, kept
    for gone in ("tex_in", "tex1Dfetch", "fetch(", "tex_kernel", "unused_table", "other(", "counter", "main"):
        assert gone not in flat, gone
    assert 'extern "C"' not in flat  # the whole linkage specification goes with its kernel


def test_a_kernel_keeps_its_texture_and_device_globals() -> None:
    flat = _kept(device_code(SOURCE, kernels=["tex_kernel"]))
    for kept in (
        "texture<float, 1, cudaReadModeElementType> tex_in;",
        "float fetch(",
        "__device__ int counter;",
    ):
        assert kept in flat, kept
    assert "axpby" not in flat and "taps[3]" not in flat and "sq(" not in flat


def test_unknown_kernel_or_none_keeps_everything() -> None:
    assert device_code(SOURCE, kernels=["no_such_kernel"]) == device_code(SOURCE)
    assert device_code(SOURCE, kernels=None) == device_code(SOURCE)
    assert "tex_kernel" in device_code(SOURCE) and "axpby" in device_code(SOURCE)


def test_several_kernels_at_once() -> None:
    flat = _kept(device_code(SOURCE, kernels=["axpby", "other"]))
    assert "axpby" in flat and "unused_table" in flat and "other(" in flat
    assert "tex_kernel" not in flat and "tex_in" not in flat


def test_referenced_globals() -> None:
    (taps,) = referenced_globals(SOURCE, ["axpby"])
    assert (taps.name, taps.type, taps.dims, taps.space, taps.pointer, taps.initialized) == (
        "taps",
        "float",
        ("3",),
        "__constant__",
        False,
        False,
    )
    assert taps.line == 5
    names = {g.name: g.space for g in referenced_globals(SOURCE, ["tex_kernel"])}
    assert names == {"tex_in": "texture", "counter": "__device__"}
    assert referenced_globals(SOURCE, ["missing"]) == ()
    multi = referenced_globals("__device__ int a = 3, b[4][M];\n__global__ void k() { b[0][0] = a; }", ["k"])
    assert [(g.name, g.dims, g.initialized) for g in multi] == [("a", (), True), ("b", ("4", "M"), False)]


def test_conv1d_sample_keeps_its_constant_and_helpers() -> None:
    text = (SAMPLES / "conv1d_constant.cu").read_text()
    out = device_code(text, kernels=["conv1d"])
    assert out == device_code(text)  # one kernel: nothing more to drop
    (coeffs,) = referenced_globals(text, ["conv1d"])
    assert (coeffs.name, coeffs.dims, coeffs.space) == ("coeffs", ("KSIZE",), "__constant__")


def _emulator():
    be = get_backend("cpu")
    if not be.devices():
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    return be


@pytest.mark.integration
def test_texture_sample_kernels_are_emulable_alone_and_together() -> None:
    """A 1-D texture reference over linear memory is emulated (a pointer and a size), so the kernel that
    reads one builds as well as its neighbour, alone or with the whole unit."""
    be = _emulator()
    text = (SAMPLES / "legacy_texture.cu").read_text()
    dirs = (str(SAMPLES),)
    binary = be.compile(
        device_code(text, kernels=["saxpy_plain"]), "saxpy_plain", CompileOptions(include_dirs=dirs)
    )
    assert binary.entry == "saxpy_plain"
    tex = be.compile(device_code(text, kernels=["scale_tex"]), "scale_tex", CompileOptions(include_dirs=dirs))
    assert tex.entry == "scale_tex"
    assert (
        be.compile(device_code(text), "saxpy_plain", CompileOptions(include_dirs=dirs)).entry == "saxpy_plain"
    )


CORPUS = sorted(SAMPLES.glob("*.cu")) + [ROOT / "tests" / "fixtures" / "cuda" / "kernel_features.cu"]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
@pytest.mark.integration
def test_every_kernel_alone_still_compiles_with_nvcc(path: Path, tmp_path: Path) -> None:
    """Whatever the filter drops, the rest still builds (compiled only when something was dropped)."""
    from porter.scan import scan_file

    text = path.read_text()
    whole = device_code(text)
    reduced = {k.name: device_code(text, kernels=[k.name]) for k in scan_file(str(path)).kernels}
    reduced = {k: v for k, v in reduced.items() if v != whole}
    if not reduced:
        return  # a single kernel and nothing it does not use: identical to the unfiltered unit
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    for kernel, out_text in reduced.items():
        assert out_text.count("\n") == text.count("\n")
        if "texture<" in out_text:
            continue  # texture references do not build with CUDA 12+
        out = tmp_path / f"{kernel}.cu"
        out.write_text(out_text)
        proc = subprocess.run(
            [
                nvcc,
                "-c",
                "-arch=sm_80",
                f"-I{SAMPLES}",
                f"-I{path.parent}",
                str(out),
                "-o",
                str(tmp_path / "k.o"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{kernel}: {proc.stderr[-2000:]}"
