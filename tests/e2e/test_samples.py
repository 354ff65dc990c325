"""The bundled samples are sound fixtures: Python modules self-check, CUDA programs build (and run on a GPU)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CUDA_DIR = SAMPLES / "cuda"
PYTHON_DIR = SAMPLES / "python"

# Programs that use APIs removed from CUDA 12+ and therefore must not build there.
REMOVED_API_SAMPLES = {"legacy_texture.cu"}
# Identifiers the CUDA 12+/13 front end must reject in those programs.
REMOVED_IDENTIFIERS = {
    "cudaThreadSynchronize",
    "cudaThreadSetCacheConfig",
    "cudaBindTexture",
    "cudaUnbindTexture",
}

PYTHON_SAMPLES = sorted(PYTHON_DIR.glob("*.py"))
CUDA_SAMPLES = sorted(CUDA_DIR.glob("*.cu"))
BUILDABLE = [p for p in CUDA_SAMPLES if p.name not in REMOVED_API_SAMPLES]
REMOVED = [p for p in CUDA_SAMPLES if p.name in REMOVED_API_SAMPLES]


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    return nvcc


def _nvcc_major(nvcc: str) -> int:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"release (\d+)\.", out)
    if match is None:
        pytest.skip(f"cannot read the nvcc version from: {out!r}")
    return int(match.group(1))


def _compile(nvcc: str, source: Path, output: Path, arch: str) -> subprocess.CompletedProcess[str]:
    cmd = [nvcc, f"-arch={arch}", "-o", str(output), str(source)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=source.parent)


def test_sample_sets_are_present() -> None:
    assert len(PYTHON_SAMPLES) >= 4
    assert len(BUILDABLE) >= 6
    assert [p.name for p in REMOVED] == sorted(REMOVED_API_SAMPLES)


@pytest.mark.parametrize("module", PYTHON_SAMPLES, ids=lambda p: p.name)
@pytest.mark.integration
def test_python_sample_self_checks(module: Path) -> None:
    proc = subprocess.run([sys.executable, str(module)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "PASS", proc.stdout


@pytest.mark.parametrize("source", CUDA_SAMPLES + [CUDA_DIR / "common.cuh"], ids=lambda p: p.name)
def test_cuda_sample_has_header_and_readme_entry(source: Path) -> None:
    text = source.read_text()
    assert text.startswith(f"// {source.name} -- "), "each sample opens with a comment naming it"
    assert f"`{source.name}`" in (SAMPLES / "README.md").read_text(), "README table lists every sample"


@pytest.mark.parametrize("module", PYTHON_SAMPLES, ids=lambda p: p.name)
def test_python_sample_listed_in_readme(module: Path) -> None:
    assert f"`{module.name}`" in (SAMPLES / "README.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("source", BUILDABLE, ids=lambda p: p.name)
@pytest.mark.integration
def test_cuda_sample_compiles(source: Path, tmp_path: Path) -> None:
    nvcc = _nvcc()
    proc = _compile(nvcc, source, tmp_path / source.stem, "sm_90")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / source.stem).is_file()


@pytest.mark.slow
@pytest.mark.parametrize("source", REMOVED, ids=lambda p: p.name)
@pytest.mark.integration
def test_removed_api_sample_fails_on_cuda12_plus(source: Path, tmp_path: Path) -> None:
    nvcc = _nvcc()
    if _nvcc_major(nvcc) < 12:
        pytest.skip("nvcc older than CUDA 12 still ships the removed APIs")
    proc = subprocess.run(
        [nvcc, "-arch=sm_90", "-c", "-o", str(tmp_path / "legacy.o"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=source.parent,
    )
    assert proc.returncode != 0
    undefined = set(re.findall(r'identifier "(\w+)" is undefined', proc.stdout + proc.stderr))
    assert undefined == REMOVED_IDENTIFIERS, proc.stdout + proc.stderr
    assert "texture is not a template" in proc.stdout + proc.stderr


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("source", BUILDABLE, ids=lambda p: p.name)
def test_cuda_sample_runs_and_passes(source: Path, tmp_path: Path) -> None:
    nvcc = _nvcc()
    binary = tmp_path / source.stem
    proc = _compile(nvcc, source, binary, "native")
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1].startswith("PASS"), run.stdout
