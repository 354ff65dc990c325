"""device_code(): host code blanked out, line numbers kept, the result compiles for the device."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from porter.scan.extract import device_code

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"

SOURCE = """\
#include <cstdio>
#define N 1024
static const int BLOCK = 256;
float* g_host;
struct Pair { float a, b; };
__constant__ float coef[4];
namespace ns {
void host_helper() { printf("x"); }
__device__ float sq(float x) { return x * x; }
template <typename T> __global__ void k(T* p) { p[threadIdx.x] = sq(coef[0]) + BLOCK; }
}
extern "C" void host_c() {}
extern "C" __global__ void kc(float* p) { p[0] = N; }
#ifdef USE_X
void only_host() {}
#else
__global__ void kx() {}
#endif
template <typename T> void host_t(T x) {}
int main() { ns::k<float><<<1, 256>>>(g_host); return 0; }
"""


def test_keeps_device_side_and_line_numbers() -> None:
    out = device_code(SOURCE)
    src_lines, out_lines = SOURCE.split("\n"), out.split("\n")
    assert len(out_lines) == len(src_lines)
    kept = {i + 1 for i, line in enumerate(out_lines) if line.strip()}
    assert kept == {1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 16, 17, 18}
    for i in kept:  # kept lines are unchanged
        assert out_lines[i - 1] == src_lines[i - 1].rstrip()
    for gone in ("main", "host_helper", "host_c", "only_host", "host_t", "g_host"):
        assert gone not in out


def samples_to_compile() -> list[Path]:
    paths = sorted(SAMPLES.glob("*.cu")) + [FIXTURES / "kernel_features.cu", FIXTURES / "params.cu"]
    # texture references are gone from CUDA 12+: that sample cannot compile with any current nvcc
    return [p for p in paths if p.name != "legacy_texture.cu"]


@pytest.mark.parametrize("path", samples_to_compile(), ids=lambda p: p.name)
@pytest.mark.integration
def test_device_code_compiles_with_nvcc(path: Path, tmp_path: Path) -> None:
    out = device_code(path.read_text())
    assert "main(" not in out
    assert out.count("\n") == path.read_text().count("\n")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    for header in path.parent.glob("*.cuh"):
        shutil.copy(header, tmp_path / header.name)
    target = tmp_path / path.name
    target.write_text(out)
    proc = subprocess.run(
        [nvcc, "-arch=sm_90", "-c", "-x", "cu", str(target), "-o", str(tmp_path / "out.o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def test_syntax_errors_do_not_stop_extraction() -> None:
    out = device_code((FIXTURES / "syntax_error.cu").read_text())
    assert "good_before" in out and "good_after" in out and "main" not in out
