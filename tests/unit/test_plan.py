"""porter.plan: one plan of a source -- instances, specs, one translation per dialect, variants."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from porter.backends import get_dialect

import porter.plan as planning
from porter.errors import PorterError
from porter.plan import make_plan

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"


def test_each_instantiation_gets_the_spec_of_its_own_launch() -> None:
    plan = make_plan(str(SAMPLES / "templated.cu"), "port")
    by_name = {i.name: i for i in plan.instances()}
    s256, s128 = plan.spec(by_name["block_sum<256>"]), plan.spec(by_name["block_sum<128>"])
    assert s256.template_args == ("256",) and s256.block == ("256",)
    assert s128.template_args == ("128",) and s128.block == ("128",)
    # the same rule answers for a name, as bench, check and optimize ask
    assert plan.spec("block_sum<128>").block == ("128",)


def test_a_dialect_is_translated_once_and_a_failure_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    dialect = get_dialect("hip")
    calls: list[str] = []
    real = dialect.translate_files

    def counting(unit: Any, options: Any = None) -> Any:
        calls.append(unit.path)
        return real(unit, options)

    monkeypatch.setattr(dialect, "translate_files", counting)
    plan = make_plan(str(SAMPLES / "templated.cu"), "port")
    first = plan.translation("hip")
    plan.instances(["hip"]), plan.variant_source("hip"), plan.untranslatable(["hip"])
    assert plan.translation("hip") is first and len(calls) == 1

    def broken(unit: Any, options: Any = None) -> Any:
        calls.append(unit.path)
        raise ValueError("overlapping edits")

    monkeypatch.setattr(dialect, "translate_files", broken)
    calls.clear()
    plan = make_plan(str(SAMPLES / "vector_add.cu"), "port")
    for _ in range(2):  # a translator crash is a one-line PorterError naming the file, asked once
        with pytest.raises(PorterError, match="hip translation failed: ValueError: overlapping edits"):
            plan.translation("hip")
    assert len(calls) == 1


def test_the_spec_file_is_read_once_for_every_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "vector_add.cu"
    shutil.copy(SAMPLES / "vector_add.cu", src)
    shutil.copy(ROOT / "tests" / "fixtures" / "specs" / "vector_add.cu.porter.toml", tmp_path)
    loads: list[Path] = []
    real = planning.load_spec_file

    def counting(path: Path) -> Any:
        loads.append(path)
        return real(path)

    monkeypatch.setattr(planning, "load_spec_file", counting)
    plan = make_plan(str(src), "port")
    for _ in range(3):
        spec = plan.spec("vector_add")
    assert spec.source == "spec-file" and spec.sizes[0] == {"n": 300}
    assert len(loads) == 1


def test_planned_kernels_carry_variants_references_and_needs(tmp_path: Path) -> None:
    plan = make_plan(str(SAMPLES / "legacy_texture.cu"), "port")
    planned = plan.kernels(["hip", "opencl"], tmp_path)
    assert [k.name for k in planned] == [i.name for i in plan.instances(["hip", "opencl"])]
    dropped = set(plan.untranslatable(["hip", "opencl"]))
    for k in planned:
        assert k.reference.original is not None
        # the reference keeps its own kernel and leaves out those some target could not take
        assert f"void {k.name.split('<')[0]}" in k.reference.original.source
        for other in dropped - {k.name}:
            assert f"void {other}(" not in k.reference.original.source
        for target, variant in k.variants.items():
            assert variant.provenance == "translate" and variant.target == target and variant.entry
            single = get_dialect(target).single_source
            assert bool(k.options[target].include_dirs) == single  # HIP finds its headers; OpenCL none


def test_plan_variants_writes_and_plans_from_one_translation_per_dialect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from porter.workflows.port import plan_variants

    calls: list[tuple[str, str]] = []
    for target in ("hip", "opencl"):
        dialect = get_dialect(target)
        real = dialect.translate_files

        def counting(unit: Any, options: Any = None, real: Any = real, target: str = target) -> Any:
            calls.append((target, unit.path))
            return real(unit, options)

        monkeypatch.setattr(dialect, "translate_files", counting)
    out = tmp_path / "out"
    planned = plan_variants(str(SAMPLES / "templated.cu"), ("hip", "opencl"), out_dir=str(out))
    assert sorted(t for t, _ in calls) == ["hip", "opencl"], calls
    assert [k.name for k in planned] == ["axpby<float>", "axpby<double>", "block_sum<256>", "block_sum<128>"]
    written = (out / "templated.cl").read_text()
    for k in planned:
        assert k.spec is not None, k.why_no_spec
        assert k.variants["opencl"].source == written and k.variants["opencl"].path == str(
            out / "templated.cl"
        )
        assert k.variants["hip"].entry and "__global__" in k.variants["hip"].source
