"""ProgramPlan.scanned_unit: a device-only port's unit translation is given the plan's scans of the files
the unit includes that launch kernels (its template instances are launched there), a mirrored port's is
not; the OpenCL translation of the main file then holds both instances helpers.cu launches."""

from __future__ import annotations

from pathlib import Path

from porter.files import snapshot
from porter.model import Translation
from porter.program import discover
from porter.workflows.program_plan import ProgramPlan

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = ROOT / "tests" / "fixtures" / "programs" / "included_launches"


def test_a_unit_translation_sees_the_launches_of_the_files_it_includes() -> None:
    with snapshot():
        plan = ProgramPlan(discover([str(PROGRAM)]))
        main = plan.file("main.cu")
        assert main is not None
        scanned = plan.scanned_unit("opencl", main)
        assert scanned is not None
        held = {Path(p).name: scan for p, scan in scanned.included}
        assert list(held) == ["helpers.cu"]  # kernels.cuh launches nothing
        assert [(x.kernel, x.template_args) for x in held["helpers.cu"].launches] == [
            ("transform", ("true",)),
            ("transform", ("false",)),
        ]
        hip = plan.scanned_unit("hip", main)
        assert hip is not None and hip.included == ()
        tr = plan.translation("opencl", main)
        assert isinstance(tr, Translation)
        assert [k.name for k in tr.kernels] == ["transform<true>", "transform<false>"]
