"""No silent degradation (issue #36): a backend that runs a port's language but lacks its devices or a
checker here is a note of the program report, with what to install."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from porter.backends import Availability, BackendBase, register_backend, unregister

from porter.workflows.program_replay import missing_here

STATE: dict[str, Availability] = {}


class _Lacking(BackendBase):
    name: ClassVar[str] = "lackgpu"
    runs: ClassVar[tuple[str, ...]] = ("lackdialect",)

    def availability(self) -> Availability:
        return STATE["now"]


@pytest.fixture
def lacking() -> Iterator[None]:
    register_backend("lackgpu", _Lacking, replace=True)
    yield
    unregister("lackgpu")


def test_a_backend_without_devices_or_with_a_checker_missing_is_said(lacking: None) -> None:
    STATE["now"] = Availability("lackgpu", True, False, "lackc 1.0", hint="install the lackgpu runtime")
    assert missing_here(("lackdialect",)) == [
        "lackgpu: no device runs code here (install the lackgpu runtime): its kernels were judged on the other "
        "devices only"
    ]
    STATE["now"] = Availability(
        "lackgpu", True, True, "lackc 1.0", hint="for the checking device: install lackcheck"
    )
    assert missing_here(("lackdialect",)) == [
        "lackgpu: part of what it checks is missing here (for the checking device: install lackcheck): replayed "
        "without it"
    ]
    STATE["now"] = Availability("lackgpu", True, True, "lackc 1.0")
    assert missing_here(("lackdialect",)) == []


def test_a_port_kernel_that_builds_in_its_program_but_not_alone_is_not_replayable_not_failed() -> None:
    from porter.results import KernelReplay, ProgramBuild, ProgramReport
    from porter.workflows.program_replay import _built_as_a_program

    report = ProgramReport("p", "o", ("hip",))
    report.builds = [ProgramBuild("hip", "cpu-runtime", "built", "cpu:cpu-emulator")]
    failed = KernelReplay(
        "hip", "cpu:cpu-emulator", "failed", "compile: the variant does not compile: timer.h:4: x"
    )
    row = _built_as_a_program(failed, report)
    assert row.status == "not-replayable" and row.reason.startswith(
        "the kernel alone does not build for its replay, though the hip program builds with cpu-runtime on "
        "cpu:cpu-emulator (porter's replay build, not the port): compile:"
    )
    # no program build there, or a failure other than the build, or the original: as it was
    elsewhere = KernelReplay("hip", "cpu:cpu-emulator-wave64", "failed", "compile: x")
    assert _built_as_a_program(elsewhere, report) == elsewhere
    wrong = KernelReplay("hip", "cpu:cpu-emulator", "failed", "matches-reference: arg1[0] = 2, expected 1")
    assert _built_as_a_program(wrong, report) == wrong
    report.builds[0].status = "failed"
    assert _built_as_a_program(failed, report) == failed
