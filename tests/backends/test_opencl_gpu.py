"""The OpenCL backend on NVIDIA's OpenCL (an H200): the CPU suite's kernels, checked against NumPy.

NVIDIA's OpenCL must be registered with the ICD loader, e.g. ``OCL_ICD_VENDORS=/etc/OpenCL/vendors``
holding ``nvidia.icd`` (one line: ``libnvidia-opencl.so.1``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from porter.backends import Device, get_backend

pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install 'porter-gpu[opencl]')")

pytestmark = pytest.mark.gpu


def _cpu_suite() -> ModuleType:
    """tests/backends/test_opencl.py, whose checks take any (backend, device)."""
    path = Path(__file__).with_name("test_opencl.py")
    spec = importlib.util.spec_from_file_location("porter_opencl_suite", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SUITE = _cpu_suite()

# Checks of test_opencl.py that hold on any OpenCL device.
SAME_CHECKS = (
    "test_saxpy",
    "test_binary_is_device_code_and_reloads",
    "test_local_memory_reduction",
    "test_2d_launch",
    "test_integer_atomics",
    "test_float_double_and_integer_scalars",
    "test_defines_reach_the_compiler",
    "test_timed_launch_returns_device_milliseconds",
    "test_compile_error_carries_log_and_numbered_source",
    "test_missing_entry_is_a_compile_error",
    "test_toolchain_id_is_stable_and_names_the_device",
    "test_launch_errors_are_launch_errors",
    "test_memory_round_trips",
    "test_job_through_the_isolation_layer",
)


@pytest.fixture(scope="module")
def backend():
    return get_backend("opencl")


@pytest.fixture(scope="module")
def nvidia(backend) -> Device:
    found = [d for d in backend.devices() if d.kind == "gpu" and "NVIDIA" in d.platform.upper()]
    if not found:
        rejected = "; ".join(backend.availability().details) or "no OpenCL platform details"
        pytest.skip(
            "no working NVIDIA OpenCL device (register libnvidia-opencl.so.1 through an .icd file in "
            f"OCL_ICD_VENDORS): {rejected}"
        )
    return found[0]


def test_nvidia_device_facts(backend, nvidia):
    assert nvidia.arch.startswith("opencl-") and nvidia.arch.endswith("/gpu")
    assert nvidia.driver
    facts = nvidia.facts
    assert facts.warp_size == 32
    assert facts.max_threads_per_block >= 1024
    assert facts.shared_mem_per_block >= 48 * 1024
    assert facts.multiprocessors is not None and facts.multiprocessors >= 1
    assert nvidia.name in backend.toolchain_id(nvidia)


@pytest.mark.parametrize("check", SAME_CHECKS)
def test_same_kernels_on_nvidia_agree_with_numpy(backend, nvidia, check):
    getattr(SUITE, check)(backend, nvidia)


def test_nvidia_binary_is_ptx(backend, nvidia):
    binary = backend.compile(SUITE.SAXPY, "saxpy", device=nvidia)
    assert binary.format == "opencl-binary"
    assert b".entry" in binary.data and b"saxpy" in binary.data  # NVIDIA gives PTX text


def test_large_reduction_on_nvidia(backend, nvidia):
    n, block = 1 << 22, 256
    groups = n // block
    x = np.random.default_rng(7).uniform(-1, 1, n).astype(np.float32)
    prog = backend.load(backend.compile(SUITE.REDUCE, "block_sum", device=nvidia), nvidia)
    d_x = backend.to_device(x, nvidia)
    d_partial = backend.alloc(groups * 4, nvidia)
    from porter.backends.isolate import LocalBuffer

    ms = prog(d_x, d_partial, LocalBuffer(block * 4), np.int32(n), grid=(groups,), block=(block,), timed=True)
    assert ms is not None and ms > 0
    partial = backend.to_host(d_partial, np.float32, (groups,))
    np.testing.assert_allclose(
        partial, x.reshape(groups, block).sum(axis=1, dtype=np.float64), rtol=1e-4, atol=1e-4
    )
