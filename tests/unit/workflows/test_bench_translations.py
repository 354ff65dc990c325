"""porter bench translates the file once per dialect, however many kernels and devices it times."""

from __future__ import annotations

from pathlib import Path

import pytest
from porter.backends import get_backend, get_dialect

from porter.workflows.bench import bench_file

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.integration
def test_one_translation_per_dialect_for_every_kernel_and_device(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        devices = [d for d in get_backend("opencl").devices() if d.kind == "cpu"]
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"OpenCL unavailable: {err}")
    if not devices:
        pytest.skip("no OpenCL CPU device here")
    dialect = get_dialect(get_backend("opencl").runs[0])
    calls: list[str] = []
    translate = dialect.translate

    def counting(source, path, include_dirs=(), options=None, *, scanned=None):  # type: ignore[no-untyped-def]
        calls.append(path)
        return translate(source, path, include_dirs, options, scanned=scanned)

    monkeypatch.setattr(dialect, "translate", counting)
    sample = ROOT / "samples" / "cuda" / "templated.cu"
    report = bench_file(str(sample), devices=devices)
    timed = [r for k in report.kernels for r in k.results]
    assert len(report.kernels) == 2 and len(timed) >= 2, report
    assert calls == [str(sample)], f"translated {len(calls)} times"
