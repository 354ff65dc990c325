"""porter.plan: one plan of a source -- instances, specs, one translation per dialect, variants."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from porter.backends import Device, get_backend, get_dialect

import porter.plan as planning
from porter.errors import PorterError
from porter.plan import PlannedVariant, Refusal, make_plan
from porter.scan.instances import Instance

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


FIXTURES = ROOT / "tests" / "fixtures" / "cuda"
NEEDS = (
    FIXTURES / "variant_needs.cu"
)  # scale: ports; warp_sum: needs sub-groups of OpenCL; fetch: a 2-D texture


def _by_name(plan: planning.Plan, targets: tuple[str, ...] = ("hip", "opencl")) -> dict[str, Instance]:
    return {i.name: i for i in plan.instances(targets)}


def test_variant_for_gives_each_targets_variant_with_its_compile_options(tmp_path: Path) -> None:
    plan = make_plan(str(NEEDS), "port", defines=("N=3",))
    scale = _by_name(plan)["scale"]
    hip = plan.variant_for(scale, "hip", out_dir=tmp_path, path="out/variant_needs.hip")
    assert isinstance(hip, PlannedVariant)
    v = hip.variant
    assert (v.kernel, v.target, v.entry, v.provenance, v.path) == (
        "scale", "hip", "scale", "translate", "out/variant_needs.hip"
    )  # fmt: skip
    # HIP compiles the file's device code without the kernel it could not take, its headers found in
    # the output folder first; the build's macros come along
    assert "void scale(" in v.source and "void warp_sum(" in v.source and "void fetch(" not in v.source
    assert "int main" not in v.source
    assert hip.compile.include_dirs == (str(tmp_path.resolve()), str(FIXTURES))
    assert hip.compile.defines == ("N=3",)
    alone = plan.variant_for(scale, "hip", unit="alone")
    assert isinstance(alone, PlannedVariant) and "void warp_sum(" not in alone.variant.source
    assert alone.compile.include_dirs == (str(FIXTURES),)  # nothing written: the original's folder
    opencl = plan.variant_for(scale, "opencl")
    assert isinstance(opencl, PlannedVariant)
    assert opencl.variant.source == plan.translation("opencl").text and opencl.compile.include_dirs == ()
    # each unit is cut once, however many kernels and devices ask
    again = plan.variant_for(_by_name(plan)["warp_sum"], "hip", out_dir=tmp_path)
    assert isinstance(again, PlannedVariant) and again.variant.source is v.source


def test_variant_for_refuses_what_the_translation_or_the_device_cannot_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = make_plan(str(NEEDS), "port")
    by_name = _by_name(plan)
    bare = Device(
        backend="opencl", name="bare", arch="opencl-1.2", kind="cpu"
    )  # reaches no runtime: no extension
    assert plan.variant_for(by_name["fetch"], "hip") == Refusal("construct", "tex")  # a 2-D texture reference
    refused = plan.variant_for(by_name["fetch"], "opencl", bare)
    assert isinstance(refused, Refusal) and refused.stage == "construct"
    assert refused.reason.startswith("tex2D(tex, ...): tex2D fetches through the texture unit")
    assert plan.variant_for(Instance("nope", "nope", ()), "hip") == Refusal(
        "kernel", "the hip translation has no kernel nope"
    )
    # the device's fitness: what the variant needs, asked of the device it is for
    lacks = plan.variant_for(by_name["warp_sum"], "opencl", bare)
    assert isinstance(lacks, Refusal) and lacks.stage == "device"
    assert lacks.reason.startswith("warp_sum needs relative sub-group shuffles, 32-wide sub-groups")
    assert lacks.reason.endswith("opencl:bare has none of them")
    unplaced = plan.variant_for(by_name["warp_sum"], "opencl")  # for no device: only compiled
    assert isinstance(unplaced, PlannedVariant) and unplaced.variant.options == ()
    fits = plan.variant_for(by_name["scale"], "opencl", bare)  # it needs nothing
    assert isinstance(fits, PlannedVariant) and fits.variant.options == ()
    backend = get_backend("opencl")
    monkeypatch.setattr(backend, "missing_requirements", lambda device, requires: [])
    monkeypatch.setattr(backend, "requirement_options", lambda device, requires: ("-cl-std=CL3.0",))
    able = plan.variant_for(by_name["warp_sum"], "opencl", bare)
    assert isinstance(able, PlannedVariant) and able.variant.options == ("-cl-std=CL3.0",)


def test_variant_for_refuses_a_target_whose_translator_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(unit: Any, options: Any = None) -> Any:
        raise ValueError("overlapping edits")

    monkeypatch.setattr(get_dialect("opencl"), "translate_files", crash)
    plan = make_plan(str(NEEDS), "port")
    scale = _by_name(plan, ("hip",))["scale"]
    assert plan.variant_for(scale, "opencl") == Refusal(
        "translator", "opencl translation failed: ValueError: overlapping edits"
    )
    assert isinstance(plan.variant_for(scale, "hip"), PlannedVariant)


def test_written_translations_and_the_plans_variants_come_from_one_translation_per_dialect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As bench/h200_port.py does: port writes the translations, the plan gives the variants."""
    from porter.workflows.options import OutputOptions
    from porter.workflows.port import port_file

    calls: list[tuple[str, str]] = []
    for target in ("hip", "opencl"):
        dialect = get_dialect(target)
        real = dialect.translate_files

        def counting(unit: Any, options: Any = None, real: Any = real, target: str = target) -> Any:
            calls.append((target, unit.path))
            return real(unit, options)

        monkeypatch.setattr(dialect, "translate_files", counting)
    out = tmp_path / "out"
    plan = make_plan(str(SAMPLES / "templated.cu"), "port")
    report = port_file(
        str(SAMPLES / "templated.cu"),
        ("hip", "opencl"),
        output=OutputOptions(str(out)),
        translate_only=True,
        plan=plan,
    )
    instances = plan.instances(report.targets)
    assert [i.name for i in instances] == [
        "axpby<float>",
        "axpby<double>",
        "block_sum<256>",
        "block_sum<128>",
    ]
    written = (out / "templated.cl").read_text()
    for inst in instances:
        assert plan.spec_or_reason(inst)[0] is not None
        cl = plan.variant_for(inst, "opencl", out_dir=out, path=report.outputs["opencl"])
        hip = plan.variant_for(inst, "hip", out_dir=out, path=report.outputs["hip"])
        assert isinstance(cl, PlannedVariant) and isinstance(hip, PlannedVariant)
        assert cl.variant.source == written and cl.variant.path == str(out / "templated.cl")
        assert hip.variant.entry and "__global__" in hip.variant.source
        # the reference keeps its own kernel
        assert f"void {inst.base}" in plan.reference(inst.base, report.targets, ()).original.source
    assert sorted(t for t, _ in calls) == ["hip", "opencl"], calls
