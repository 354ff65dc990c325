"""`scan_paths(jobs=N)`: worker processes give the same result, in the same order, as one process."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import porter.scan as scan_mod
from porter.scan import default_jobs, scan_paths

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Samples, fixtures (bad files included) and a large file, so workers get uneven work."""
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    shutil.copytree(ROOT / "tests" / "fixtures" / "cuda", tmp_path / "fixtures")
    (tmp_path / "fixtures" / "bin.cu").write_bytes(b"\x7fELF\x00")
    big = (ROOT / "samples" / "cuda" / "matmul_tiled.cu").read_text() * 40
    (tmp_path / "big.cu").write_text(big)
    return tmp_path


@pytest.mark.integration
def test_workers_give_the_sequential_result(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_mod, "PARALLEL_MIN_BYTES", 0)
    one = scan_paths([str(tree)], jobs=1)
    many = scan_paths([str(tree)], jobs=3)
    assert len(one.files) > 10 and one.errors and one.skipped
    assert many == one
    # the macro table reaches the workers whole: kernels behind scope macros are found there too
    scoped = next(f for f in many.files if f.path.endswith("scoped.cu"))
    assert [k.name for k in scoped.kernels] == ["affine_clamp", "square_in_place"]
    # and the build's -D/-U too
    built = {"defines": ["USE_DOUBLE", "KERNEL=__global__"], "undefines": ["N"]}
    assert scan_paths([str(tree)], jobs=3, **built) == scan_paths([str(tree)], jobs=1, **built)


def test_small_inputs_stay_in_process(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*args: object) -> None:
        raise AssertionError("a pool was started for a small scan")

    monkeypatch.setattr(scan_mod, "_scan_parallel", no_pool)
    assert scan_paths([str(tree / "samples")], jobs=4).files


_PARENT = os.getpid()
_REAL_SCAN_ONE = scan_mod._scan_one


def _crash_on_big(
    name: str, explicit: bool, include_dirs: tuple[str, ...], shared: object, command_line: object = None
) -> object:
    """A worker that dies on one file, as a segfault in native code would end it."""
    if os.getpid() != _PARENT and name.endswith("big.cu"):
        os._exit(3)
    return _REAL_SCAN_ONE(name, explicit, include_dirs, shared, command_line)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash is injected through fork")
@pytest.mark.integration
def test_a_dead_worker_does_not_lose_files(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan_mod, "_scan_one", _crash_on_big)
    expected = scan_paths([str(tree)], jobs=1)
    assert scan_paths([str(tree)], jobs=2) == expected


def test_default_jobs_is_the_usable_cpu_count() -> None:
    assert 1 <= default_jobs() <= (os.cpu_count() or 1)
