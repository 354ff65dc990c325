"""Device code that tests CUDART_VERSION builds as nvcc builds it: nvcc includes cuda_runtime.h in every .cu,
so the version is defined in device code.  Rodinia cfd's double-precision programs declare
``#if CUDART_VERSION < 3000 struct double3 {...}; #endif`` (CUDA 2 had no double3): where the macro was missing
the CPU emulator (and NVRTC) compiled the struct and failed with "redefinition of 'struct double3'", so none of
their kernels was judged.  HIP defines no CUDART_VERSION: a HIP port on the emulator does not see one."""

from __future__ import annotations

import shutil

import pytest
from porter.backends import CompileOptions

SOURCE = """
#if CUDART_VERSION < 3000
struct double3 { double x, y, z; };
#endif
__global__ void scale3(double3* v, double s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { v[i].x *= s; v[i].y *= s; v[i].z *= s; }
}
"""
HIP_SOURCE = """#include <hip/hip_runtime.h>
#ifdef CUDART_VERSION
#error "HIP defines no CUDART_VERSION"
#endif
__global__ void twice(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")
def test_the_emulator_defines_the_runtime_version_for_cuda_and_not_for_hip() -> None:
    from porter.backends.cpu import CpuBackend
    from porter.backends.cpu.program import runtime_version

    be = CpuBackend()
    assert be.compile(SOURCE, "scale3", CompileOptions()).entry == "scale3"
    assert be.compile(HIP_SOURCE, "twice", CompileOptions()).entry == "twice"
    # the caller's own value wins (no second definition)
    older = CompileOptions(defines=(f"CUDART_VERSION={runtime_version() - 1000}",))
    assert be.compile(SOURCE, "scale3", older).entry == "scale3"


def test_nvrtc_gets_its_own_version() -> None:
    from porter.backends.cuda import _runtime_version_define, toolchain

    version = toolchain.nvrtc_version()
    if version is None:
        pytest.skip("NVRTC not installed (pip install 'porter-gpu[cuda]')")
    major, _, minor = version.partition(".")
    assert _runtime_version_define(()) == (f"CUDART_VERSION={int(major) * 1000 + int(minor) * 10}",)
    assert _runtime_version_define(("CUDART_VERSION=11000",)) == ()
    from porter.backends.cuda import CudaBackend

    assert "scale3" in CudaBackend().compile(SOURCE, "scale3", CompileOptions(arch="sm_90")).entry
