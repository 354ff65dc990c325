"""Barriers in both branches of one if/else (issue #30): legal in CUDA and OpenCL where every work-item of a group
takes the same branch, computed wrongly by Debian's PoCL 3.1 (pocl/pocl#553, #1167).  Porter's device probe
(probe_barriers.cl) finds such a device; a translated kernel of that shape requires ``branch_barriers``, so on that
device it is left out -- its program run not-run and its replay row not replayable, each saying why -- and it is
judged on the other devices.  Our fixture: tests/fixtures/programs/branch_barriers (block sums whose last, partial
block sums in a loop of its own)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.programs import run_porter
from porter.backends.opencl import requirements
from porter.backends.opencl.branches import barriers_in_both_branches
from porter.backends.opencl.translate import translate_to_opencl

PROGRAM = Path(__file__).resolve().parents[2] / "fixtures" / "programs" / "branch_barriers"
SYNC = "barrier(CLK_LOCAL_MEM_FENCE);"


def _kernel(body: str) -> str:
    return f"__kernel void k(__global int* out) {{\n  int g = get_group_id(0);\n{body}\n}}\n"


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (f"if (g) {{ {SYNC} }} else {{ {SYNC} }}", True),
        (f"if (g) {{ for (;;) {{ {SYNC} }} }} else {{ while (1) {{ {SYNC} }} }}", True),
        (f"if (g) {{ {SYNC} }} else if (g > 2) {{ {SYNC} }}", True),  # the else holds an if with one
        (f"if (g) {{ {SYNC} }} else {{ if (g > 2) {{ {SYNC} }} }}", True),
        (f"for (;;) {{ if (g) {{ {SYNC} }} else {{ {SYNC} }} }}", True),  # at any depth
        (f"if (g) {{ {SYNC} }}", False),  # no else
        (f"if (g) {{ {SYNC} }} else {{ out[0] = 1; }}", False),  # one branch only
        (f"if (g) {{ out[0] = 1; }} else {{ {SYNC} }}", False),
        (
            f"if (g) {{ {SYNC} }}\nif (g > 1) {{ {SYNC} }}",
            False,
        ),  # two ifs, no else: reduction's blockSize tests
        ("if (g) { sync_here(); } else { sync_here(); }", False),  # through a call: not seen
        (f"// if (g) {{ {SYNC} }} else {{ {SYNC} }}\n{SYNC}", False),  # a comment
        (f"if (g) {{ work_group_barrier(CLK_LOCAL_MEM_FENCE); }} else {{ {SYNC} }}", True),
    ],
)
def test_the_shape_is_found_in_opencl_c(body: str, found: bool) -> None:
    assert barriers_in_both_branches(_kernel(body)) is found


def test_a_translated_kernel_of_that_shape_requires_it_and_a_plain_one_does_not() -> None:
    text = (PROGRAM / "main.cu").read_text(encoding="utf-8")
    tr = translate_to_opencl(text, "main.cu")
    (kernel,) = [k for k in tr.kernels if k.name == "block_sums"]
    assert "branch_barriers" in kernel.requires
    assert "!defined(PORTER_NO_BRANCH_BARRIERS)" in tr.text  # left out where the probe defines it
    plain = text.replace("if (b != gridDim.x - 1) {", "if (true) {").replace(
        "} else {\n        int width", "}\n    {\n        int width"
    )
    assert plain != text
    (kernel,) = [k for k in translate_to_opencl(plain, "main.cu").kernels if k.name == "block_sums"]
    assert "branch_barriers" not in kernel.requires


def test_a_device_that_fails_the_probe_is_told_in_words() -> None:
    broken = requirements.Capabilities(broken=frozenset({"branch_barriers"}))
    assert not requirements.supports(broken, "branch_barriers")
    assert requirements.supports(requirements.NONE, "branch_barriers")  # core OpenCL C: every device has it
    assert requirements.disabled(broken) == ("-DPORTER_NO_BRANCH_BARRIERS",)
    assert requirements.disabled(requirements.NONE) == ()
    said = requirements.guard_words(
        "kernel 'k' needs !defined(PORTER_NO_BRANCH_BARRIERS), which X lacks", broken.broken
    )
    assert said == (
        "kernel 'k' needs barriers in both branches of an if/else (core OpenCL C, which this device computes wrongly "
        "(porter's probe)), which X lacks"
    )


def _cpu_devices() -> list[Any]:
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from porter.backends import get_backend
    from porter.backends.opencl.devices import capabilities

    devices = [d for d in get_backend("opencl").devices() if d.kind == "cpu"]
    if not devices:
        pytest.skip("no CPU OpenCL device (apt-get install pocl-opencl-icd)")
    return [(d, "branch_barriers" in capabilities(d).broken) for d in devices]


@pytest.mark.integration
def test_the_probe_marks_debians_pocl_3_and_not_intels_runtime() -> None:
    """Measured here: Debian's PoCL 3.1 computes probe_barriers.cl wrongly, Intel's CPU runtime (2026) right.
    Other devices and versions are whatever their probe says (not asserted)."""
    seen = 0
    for device, broken in _cpu_devices():
        if device.platform.startswith("Portable Computing Language") and device.driver.startswith("3."):
            assert broken, device.label
            seen += 1
        elif device.platform.startswith("Intel"):
            assert not broken, device.label
            seen += 1
    if not seen:
        pytest.skip("neither Debian's PoCL 3 nor Intel's CPU runtime here")


@pytest.mark.integration
def test_the_program_is_judged_where_the_device_computes_it_and_left_out_where_it_does_not(
    tmp_path: Path,
) -> None:
    devices = _cpu_devices()
    if not any(broken for _, broken in devices) or all(broken for _, broken in devices):
        pytest.skip(
            "needs one CPU OpenCL device that fails the probe (Debian's PoCL 3.1) and one that passes"
        )
    out = tmp_path / "out"
    args = ["port", str(PROGRAM), "--to", "opencl", "--run", "", "--toolchains", "cpu-runtime,opencl"]
    r = run_porter(tmp_path, *args, "--out", str(out), "--json", timeout=900)
    doc = json.loads(r.stdout)
    assert doc["program"]["verdicts"]["opencl"]["status"] == "matches", doc["program"]["verdicts"]
    for device, broken in devices:
        (run,) = [v for v in doc["program"]["runs"][0]["variants"] if v["device"] == device.label]
        rows = [
            x
            for k in doc["kernels"]
            for x in k["replays"]
            if x["variant"] == "opencl" and x["device"] == device.label
        ]
        assert len(rows) == 1, rows
        if broken:
            assert run["status"] == "not-run", run
            assert (
                "barriers in both branches of an if/else" in run["reason"]
                and "porter's probe" in run["reason"]
            )
            assert rows[0]["status"] == "not-replayable" and "porter's probe" in rows[0]["reason"], rows[0]
        else:
            assert run["status"] == "matches", run
            assert rows[0]["status"] == "validated", rows[0]
    assert doc["kernel_counts"]["opencl"]["validated"] == 1
