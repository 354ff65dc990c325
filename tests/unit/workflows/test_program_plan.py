"""porter.workflows.program_plan: a program's files read and scanned once, its translations held in memory,
and every kernel's variant answered from them with the flags its unit is built with."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from porter import grammars
from porter.files import READS, carried, read_input, snapshot
from porter.plan import PlannedVariant, Refusal
from porter.program import discover
from porter.workflows.program_plan import ProgramPlan

ROOT = Path(__file__).resolve().parents[3]
SMOOTH = ROOT / "samples" / "programs" / "smooth"
PER_UNIT = ROOT / "tests" / "fixtures" / "programs" / "per_unit_macros"


@pytest.fixture
def smooth(tmp_path: Path) -> Path:
    shutil.copytree(SMOOTH, tmp_path / "smooth")
    return tmp_path / "smooth"


def test_each_translation_is_made_once_and_kept(smooth: Path, translated: list[str]) -> None:
    with snapshot():
        plan = ProgramPlan(discover([str(smooth)]))
        main = plan.file("src/main.cu")
        assert main is not None
        first = plan.translation("hip", main)
        assert plan.translation("hip", main) is first
        plan.entries("hip")  # every file of the mirrored tree translated once, main.cu not again
        plan.entries("opencl")
    # util.cpp and util.h hold no CUDA: copied as they are, never translated
    assert sorted(translated) == ["hip:main.cu", "hip:smooth_kernels.cuh", "opencl:main.cu"]


def test_variants_come_from_the_plan_not_from_the_written_outputs(smooth: Path, tmp_path: Path) -> None:
    """Nothing is written here: the HIP and OpenCL variants are what the translations held in memory say;
    the OpenCL one carries its launch mapping (argument map, added arguments) without a .launch.json."""
    with snapshot():
        plan = ProgramPlan(discover([str(smooth)]))
        entries = plan.entries("hip")
        assert set(entries) == {"box_smooth", "affine"}
        assert entries["box_smooth"][1] == "include/smooth_kernels.cuh"  # the header that defines it
        out = tmp_path / "never-written"
        hip = plan.variant("hip", "box_smooth", "box_smooth", "include/smooth_kernels.cuh", out)
        assert isinstance(hip, PlannedVariant)
        assert hip.variant.target == "hip" and "__global__" in hip.variant.source
        assert "hip" in hip.variant.source.lower() and hip.variant.path == str(
            out / "hip" / "include" / "smooth_kernels.cuh"
        )
        assert str(out / "hip" / "include") in hip.compile.include_dirs
        ocl = plan.variant("opencl", "box_smooth", "box_smooth", "include/smooth_kernels.cuh", out)
        assert isinstance(ocl, PlannedVariant)
        assert "__kernel" in ocl.variant.source and ocl.variant.arg_map
        assert ocl.variant.path == str(out / "opencl" / "src" / "main.cl")
        original = plan.original("box_smooth", "include/smooth_kernels.cuh")
        assert isinstance(original, PlannedVariant) and original.variant.provenance == "original"
    assert not out.exists()


def test_what_a_unit_includes_is_digested_from_the_plan(smooth: Path) -> None:
    """The keys of a unit's build and of its replays hold a digest of what it includes as each tree holds
    it: the original's headers for the original, their translations for a HIP port."""
    with snapshot():
        plan = ProgramPlan(discover([str(smooth)]))
        main = plan.file("src/main.cu")
        assert main is not None
        assert {str(g.rel) for g in plan.reached(main)} == {"include/util.h", "include/smooth_kernels.cuh"}
        original, hip = plan.tree_digest(None, main), plan.tree_digest("hip", main)
        assert original != hip  # the kernels' header is translated in the HIP tree
    (smooth / "include" / "util.h").write_text("#pragma once\n/* edited */\n")
    with snapshot():
        edited = ProgramPlan(discover([str(smooth)]))
        main = edited.file("src/main.cu")
        assert main is not None and edited.tree_digest(None, main) != original


def test_a_kernel_no_translation_holds_is_refused_with_what_the_translator_said(smooth: Path) -> None:
    with snapshot():
        plan = ProgramPlan(discover([str(smooth)]))
        refused = plan.variant("opencl", "nope", "nope", "src/main.cu", smooth.parent / "o")
        assert refused == Refusal("kernel", "the opencl port has no translation of nope")
        said = "untranslatable: a texture"
        assert plan.variant("opencl", "nope", "nope", "src/main.cu", smooth.parent / "o", said) == Refusal(
            "construct", "the opencl port: untranslatable: a texture"
        )


def test_each_unit_keeps_its_own_defines(tmp_path: Path) -> None:
    """a.cu is built with -DSCALE=2.0f and b.cu with -DSCALE=10.0f (compile_commands.json): the original
    and every port of a kernel get the defines of the unit it is built in."""
    src = tmp_path / "pu"
    shutil.copytree(PER_UNIT, src)
    db = json.loads((src / "compile_commands.json").read_text())
    for entry in db:
        entry["directory"] = str(src)
    (src / "compile_commands.json").write_text(json.dumps(db))
    with snapshot():
        plan = ProgramPlan(discover([str(src / "compile_commands.json")]))
        by_unit = {}
        for rel in ("a.cu", "b.cu"):
            f = plan.file(rel)
            assert f is not None
            kernel = plan.facts(f).kernels[0][0]
            original = plan.original(kernel, rel)
            port = plan.variant("hip", kernel, kernel, rel, tmp_path / "out")
            assert isinstance(original, PlannedVariant) and isinstance(port, PlannedVariant)
            assert original.compile.defines == port.compile.defines
            by_unit[rel] = original.compile.defines
    assert "SCALE=2.0f" in by_unit["a.cu"] and "SCALE=10.0f" in by_unit["b.cu"]


def test_a_worker_thread_reads_inside_the_commands_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    path.write_bytes(b"first")
    seen: list[bytes] = []
    READS.clear()
    with snapshot():
        assert read_input(path) == b"first"
        path.write_bytes(b"second")
        worker = threading.Thread(target=carried(lambda: seen.append(read_input(path))))
        worker.start()
        worker.join()
    assert seen == [b"first"] and READS[str(path)] == 1


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_program_port_with_run_reads_and_parses_each_user_file_once(smooth: Path, tmp_path: Path) -> None:
    """Translations, unit builds, the program's builds and runs, capture and every kernel replay: each of
    the user's files comes off the disk once and each text is parsed once."""
    from porter.workflows.program import port_program
    from porter.workflows.program_run import ProgramRuns

    READS.clear()
    grammars.forget()
    report = port_program(
        [str(smooth)], ["hip", "opencl"], out_dir=str(tmp_path / "out"), fresh=True,
        run=ProgramRuns(("./smooth data/values.txt 4",), toolchains=("cpu-runtime",)),
    )  # fmt: skip
    replays = [r.status for k in report.kernels for r in k.replays]
    assert replays and set(replays) == {"validated"}, replays
    user = {p: n for p, n in READS.items() if Path(p).is_relative_to(smooth.resolve())}
    assert user, "the port read nothing through porter.files: the counter is not wired"
    assert all(n == 1 for n in user.values()), {os.path.relpath(p, smooth): n for p, n in user.items()}
    for rel in ("src/main.cu", "src/util.cpp", "include/util.h", "include/smooth_kernels.cuh"):
        assert READS[str((smooth / rel).resolve())] == 1, rel
        key = ("cuda", grammars.digest((smooth / rel).read_bytes()))
        assert grammars.PARSES[key] == 1, f"{rel} parsed {grammars.PARSES[key]} times"
    twice = [k for k, n in grammars.PARSES.items() if n > 1]
    assert not twice, f"{len(twice)} texts parsed more than once"
    # data flows forward: no stage read back what an earlier one wrote (ports, launch mappings, headers)
    outputs = [p for p in READS if Path(p).is_relative_to((tmp_path / "out").resolve())]
    assert not outputs, outputs
