"""porter.workflows.port: targets, instantiations, per-instantiation specs, outputs and exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.harness.validate import ValidateOptions
from porter.results import KernelResult, PortReport, VariantRow
from porter.workflows.options import OutputOptions, RunOptions
from porter.workflows.port import (
    _relative_name,
    default_out_dir,
    parse_targets,
    port_file,
)

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"


def test_parse_targets() -> None:
    assert parse_targets("hip,opencl") == ("hip", "opencl")
    assert parse_targets(["OpenCL", "hip, opencl"]) == ("opencl", "hip")
    with pytest.raises(UsageError) as err:
        parse_targets("hip,metal")
    assert "metal" in str(err.value) and err.value.exit_code == 2
    with pytest.raises(UsageError):
        parse_targets(" , ")


def test_default_out_dir_is_beside_the_input() -> None:
    assert default_out_dir("/a/b/vector_add.cu") == Path("/a/b/vector_add.ported")


def test_relative_name_keeps_subfolders(tmp_path: Path) -> None:
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "inc").mkdir()
    assert _relative_name(tmp_path / "src" / "sub" / "a.cuh", tmp_path / "src", ()) == Path("sub/a.cuh")
    assert _relative_name(tmp_path / "inc" / "b.h", tmp_path / "src", [str(tmp_path / "inc")]) == Path("b.h")
    assert _relative_name(tmp_path / "elsewhere" / "c.h", tmp_path / "src", ()) == Path("c.h")


def _row(status: str, device: str = "cpu:cpu-emulator", target: str = "hip") -> VariantRow:
    return VariantRow(target, "x." + target, status, device)


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        (["validated", "compiled"], 0),
        (["translated"], 0),
        (["validated", "failed"], 1),
        ([], 1),
    ],
)
def test_exit_code(statuses: list[str], code: int) -> None:
    report = PortReport("x.cu", "out", ("hip",), False, [KernelResult("k", [_row(s) for s in statuses])])
    assert report.exit_code == code


@pytest.mark.parametrize(
    ("rows", "code"),
    [
        # The kernel itself cannot be translated: always 1.
        ([_row("untranslatable", "")], 1),
        ([_row("validated"), _row("untranslatable", "", "opencl")], 1),
        # One device lacks what the kernel needs, another validated it: 0.
        ([_row("untranslatable", "opencl:pocl", "opencl"), _row("validated", "opencl:intel", "opencl")], 0),
        # No device of the target has what it needs: 1.
        ([_row("validated"), _row("untranslatable", "opencl:pocl", "opencl")], 1),
        ([_row("untranslatable", "opencl:pocl", "opencl"), _row("failed", "opencl:intel", "opencl")], 1),
    ],
)
def test_exit_code_device_level_untranslatable(rows: list[VariantRow], code: int) -> None:
    report = PortReport("x.cu", "out", ("hip", "opencl"), False, [KernelResult("k", rows)])
    assert report.exit_code == code


def test_document_schema() -> None:
    report = PortReport("x.cu", "out", ("hip",), False, [KernelResult("k", [_row("validated")])])
    doc = report.document()
    assert list(doc) == ["source", "kernels"]
    assert list(doc["kernels"][0]["variants"][0]) == [
        "target",
        "path",
        "status",
        "device",
        "max_rel_err",
        "trials",
        "reason",
    ]
    full = report.full_document()
    assert full["kernels"][0]["variants"][0]["logs"] == [] and full["complete"] is False


def test_translate_only_writes_outputs_and_report(tmp_path: Path) -> None:
    shutil.copy2(SAMPLES / "templated.cu", tmp_path / "templated.cu")
    shutil.copy2(SAMPLES / "common.cuh", tmp_path / "common.cuh")
    seen: list[str] = []
    report = port_file(
        str(tmp_path / "templated.cu"), ["hip", "opencl"], translate_only=True, progress=seen.append
    )
    out = tmp_path / "templated.ported"
    assert report.out_dir == str(out) and report.complete
    assert (out / "templated.hip").is_file() and (out / "templated.cl").is_file()
    assert "axpby_float" in (out / "templated.cl").read_text()
    assert [k.name for k in report.kernels] == [
        "axpby<float>",
        "axpby<double>",
        "block_sum<256>",
        "block_sum<128>",
    ]
    assert all(r.status == "translated" for r in report.rows()) and report.exit_code == 0
    saved = json.loads((out / "report.json").read_text())
    assert (
        saved["complete"] is True
        and saved["kernels"] == json.loads(json.dumps(report.full_document()))["kernels"]
    )
    assert seen  # progress was reported


def test_untranslatable_kernel_row_names_the_construct(tmp_path: Path) -> None:
    # a texture read through the texture unit (tex1D), which OpenCL needs images for
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy2(SAMPLES / "common.cuh", src / "common.cuh")
    text = (SAMPLES / "legacy_texture.cu").read_text()
    (src / "legacy_texture.cu").write_text(text.replace("tex1Dfetch(tex_in, i)", "tex1D(tex_in, i + 0.5f)"))
    report = port_file(
        str(src / "legacy_texture.cu"),
        ["opencl"],
        output=OutputOptions(str(tmp_path / "out")),
        translate_only=True,
    )
    rows = {k.name: k.variants for k in report.kernels}
    assert [r.status for r in rows["scale_tex"]] == ["untranslatable"]
    assert "tex1D" in rows["scale_tex"][0].reason
    assert [r.status for r in rows["saxpy_plain"]] == ["translated"]
    assert report.exit_code == 1


def test_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    shutil.copy2(SAMPLES / "vector_add.cu", tmp_path / "vector_add.cu")
    shutil.copy2(SAMPLES / "common.cuh", tmp_path / "common.cuh")
    before = (tmp_path / "common.cuh").read_bytes()
    with pytest.raises(UsageError, match="overwrite"):
        port_file(
            str(tmp_path / "vector_add.cu"), ["hip"], output=OutputOptions(str(tmp_path)), translate_only=True
        )
    assert (tmp_path / "common.cuh").read_bytes() == before


def test_missing_and_non_cuda_inputs(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        port_file(str(tmp_path / "nope.cu"), ["hip"], translate_only=True)
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(UsageError, match="not a CUDA source"):
        port_file(str(tmp_path / "notes.txt"), ["hip"], translate_only=True)


@pytest.mark.integration
def test_device_lacking_subgroups_gets_an_untranslatable_row(tmp_path: Path) -> None:
    """Per device: reduce_shfl's OpenCL variant is untranslatable, with the reason, where 32-wide
    sub-groups cannot be required, and validated where they can (Intel's CPU runtime)."""
    from porter.backends import get_backend

    try:
        devices = list(get_backend("opencl").devices())
    except Exception:  # noqa: BLE001 - no OpenCL here at all
        devices = []
    if not devices:
        pytest.skip("no OpenCL device (pip install pyopencl; apt-get install pocl-opencl-icd)")
    if not any(d.backend == "cpu" for d in get_backend("cpu").devices()):
        pytest.skip("the CPU emulator (the reference) is unavailable")
    shutil.copy2(SAMPLES / "reduce_shfl.cu", tmp_path / "reduce_shfl.cu")
    shutil.copy2(SAMPLES / "common.cuh", tmp_path / "common.cuh")
    report = port_file(
        str(tmp_path / "reduce_shfl.cu"), ["opencl"], run=RunOptions(validate=ValidateOptions(trials=1))
    )
    rows = {r.device: r for r in report.rows()}
    assert set(rows) == {d.label for d in devices}
    lacking = [r for r in rows.values() if r.status == "untranslatable"]
    for r in lacking:
        assert r.reason.startswith("reduce_sum needs ") and r.device in r.reason, r
        assert (
            "cl_intel_required_subgroup_size" in r.reason and "cl_khr_subgroup_shuffle_relative" in r.reason
        )
    others = [r for r in rows.values() if r.status != "untranslatable"]
    assert all(r.status == "validated" for r in others), others
    assert report.exit_code == (0 if others else 1)


def test_a_translator_crash_fails_its_target_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from porter.backends import get_dialect

    def crash(unit: object, options: object = None) -> object:
        raise ValueError("overlapping edits")

    monkeypatch.setattr(get_dialect("opencl"), "translate_files", crash)
    out = tmp_path / "out"
    report = port_file(
        str(SAMPLES / "templated.cu"), ["hip", "opencl"], output=OutputOptions(str(out)), translate_only=True
    )
    assert report.complete and report.targets == ("hip", "opencl")
    for kernel in report.kernels:
        by_target = {r.target: r for r in kernel.variants}
        assert by_target["hip"].status == "translated"
        assert by_target["opencl"].status == "failed"
        assert "opencl translation failed: ValueError: overlapping edits" in by_target["opencl"].reason
    assert (out / "templated.hip").is_file() and not (out / "templated.cl").exists()
    assert "opencl: error: opencl translation failed" in (out / "diagnostics.txt").read_text()
    saved = json.loads((out / "report.json").read_text())
    assert saved["complete"] is True
