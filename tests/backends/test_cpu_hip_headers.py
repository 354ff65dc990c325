"""HIP code from before ROCm put its headers under hip/ (HIP 1.x: `#include "hip_runtime.h"`) builds on
the CPU emulator, as in a program build, so a hand port of that age can be replayed (porter verify)."""

from __future__ import annotations

import shutil

import pytest
from porter.backends import get_backend

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")

SOURCE = """#include "hip_runtime.h"
#include "hip_runtime_api.h"
__global__ void twice(float* x, int n) {
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] *= 2.0f;
}
"""


def test_a_kernel_including_the_old_hip_header_names_builds() -> None:
    backend = get_backend("cpu")
    binary = backend.compile(SOURCE, "twice", device=backend.devices()[0])
    assert binary is not None
