"""Shared test setup: `gpu`-marked tests skip cleanly where no NVIDIA GPU can run them, and count as
`integration` (the tier that `-m "not integration"` leaves out)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


@functools.cache
def nvidia_gpu() -> str | None:
    """None when an NVIDIA GPU is usable here, else why not."""
    if not shutil.which("nvidia-smi"):
        return "no NVIDIA GPU (nvidia-smi not found)"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"no NVIDIA GPU ({err})"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "no NVIDIA GPU (nvidia-smi lists none)"
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "NVIDIA GPU present but CuPy is not installed"
    return None


def mark_tiers(items) -> None:
    """A test that needs an NVIDIA GPU is an integration test too, so ``-m "not integration"`` (the fast
    tier) never reaches a device."""
    for item in items:
        if "gpu" in item.keywords and "integration" not in item.keywords:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    mark_tiers(items)
    reason = nvidia_gpu()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def emulator() -> None:
    """Skip a test that runs kernels where porter's CPU emulator cannot (no g++)."""
    from porter.backends import get_backend

    try:
        found = bool(get_backend("cpu").devices())
    except Exception:  # noqa: BLE001 - a backend that cannot load is an emulator that is not there
        found = False
    if not found:
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
