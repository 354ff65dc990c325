"""porter verify (issue #35): a HIP port someone wrote by hand, checked against its CUDA original as a
program and kernel by kernel, at 32 and at 64 lanes.  The ports under tests/fixtures/verify are ours,
each with one of the defects hand ports to AMD are known for, and one correct port."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.results import ProgramReport
from porter.workflows.program_run import ProgramRuns
from porter.workflows.verify import verify_program

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "verify"
ORIGINAL = HERE / "vote_cuda"
NARROW, WIDE = "cpu:cpu-emulator", "cpu:cpu-emulator-wave64"


def _verify(port: Path, tmp_path: Path, original: Path = ORIGINAL) -> ProgramReport:
    return verify_program(
        [str(port)], [str(original)], out_dir=str(tmp_path / "out"),
        run=ProgramRuns(runs=("",), toolchains=("cpu-runtime",)),
    )  # fmt: skip


def _runs(report: ProgramReport) -> dict[str, str]:
    return {v.device: v.status for r in report.runs for v in r.variants}


def _replays(report: ProgramReport, kernel: str) -> dict[str, str]:
    return {
        r.device: r.status
        for k in report.kernels
        if k.name == kernel
        for r in k.replays
        if r.variant == "hip"
    }


def _digest(folder: Path) -> str:
    return hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    ).hexdigest()


def test_a_correct_hand_port_is_accepted_at_both_widths_and_no_file_of_the_user_is_touched(
    tmp_path: Path,
) -> None:
    before = (_digest(HERE / "vote_hip"), _digest(ORIGINAL))
    report = _verify(HERE / "vote_hip", tmp_path)
    assert _runs(report) == {NARROW: "matches", WIDE: "matches"}
    for kernel in ("count_positive", "scale"):
        assert _replays(report, kernel) == {NARROW: "validated", WIDE: "validated"}
    assert report.exit_code == 0 and report.build["port"] == str(HERE / "vote_hip")
    assert {k.name: k.targets["hip"] for k in report.kernels} == {
        "count_positive": "matched: main.hip:5 of the port",
        "scale": "matched: main.hip:12 of the port",
    }
    assert (_digest(HERE / "vote_hip"), _digest(ORIGINAL)) == before


@pytest.mark.parametrize("port", ["vote_hip_ballot32", "vote_hip_lane32"])
def test_a_wave_size_defect_is_caught_at_64_lanes_and_not_at_32(port: str, tmp_path: Path) -> None:
    report = _verify(HERE / port, tmp_path)
    assert _runs(report) == {NARROW: "matches", WIDE: "differs"}
    assert report.verdicts()["hip"]["detail"].startswith(
        f"on {WIDE}: stdout line 1: original 'block 0: 137 positive'"
    )
    assert _replays(report, "count_positive") == {NARROW: "validated", WIDE: "failed"}
    assert _replays(report, "scale") == {NARROW: "validated", WIDE: "validated"}
    assert report.exit_code == 1


def test_a_plain_defect_differs_at_every_width(tmp_path: Path) -> None:
    report = _verify(HERE / "vote_hip_wrong", tmp_path)
    assert _runs(report) == {NARROW: "differs", WIDE: "differs"}
    assert _replays(report, "scale") == {NARROW: "failed", WIDE: "failed"}
    assert _replays(report, "count_positive") == {NARROW: "validated", WIDE: "validated"}


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    port = tmp_path / "port"
    shutil.copytree(HERE / "vote_hip", port)
    text = (port / "main.hip").read_text()
    assert old in text
    (port / "main.hip").write_text(text.replace(old, new))
    return port


def test_a_kernel_the_port_lacks_or_renamed_is_listed_and_the_program_still_compared(tmp_path: Path) -> None:
    port = _edited(tmp_path, "scale", "scale_by")
    report = _verify(port, tmp_path)
    scale = next(k for k in report.kernels if k.name == "scale")
    assert scale.targets["hip"] == "the port defines no kernel scale"
    assert {r.status for r in scale.replays if r.variant == "hip"} == {"not-replayable"}
    assert any("the port's kernel scale_by (main.hip:12) has no kernel of that name in the original" in n
               for n in report.notes)  # fmt: skip
    assert _runs(report) == {NARROW: "matches", WIDE: "matches"}


def test_a_kernel_of_another_signature_is_not_taken_for_the_original(tmp_path: Path) -> None:
    port = _edited(tmp_path, "void scale(float* x, float a, int n)", "void scale(double* x, float a, int n)")
    report = _verify(port, tmp_path)
    scale = next(k for k in report.kernels if k.name == "scale")
    assert scale.targets["hip"].startswith(
        "the port's scale (main.hip:12) takes (double*, float, int), the original"
    )
    assert "not the same kernel" in scale.targets["hip"]


def test_what_verify_refuses(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="two folders"):
        _verify(ORIGINAL, tmp_path)
    empty = tmp_path / "empty_port"
    empty.mkdir()
    (empty / "main.hip").write_text("#include <hip/hip_runtime.h>\nint main() { return 0; }\n")
    with pytest.raises(UsageError, match="defines no kernel"):
        _verify(empty, tmp_path)
    with pytest.raises(UsageError, match="single-source language"):
        verify_program(
            [str(HERE / "vote_hip")], [str(ORIGINAL)], target="opencl", out_dir=str(tmp_path / "o")
        )


def test_the_command_line_exits_1_on_a_defect_and_0_on_a_good_port(tmp_path: Path) -> None:
    def verify(port: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "porter", "verify", str(HERE / port), "--against", str(ORIGINAL), "--run", "",
             "--toolchains", "cpu-runtime", "--out", str(tmp_path / port)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip

    bad = verify("vote_hip_ballot32")
    assert bad.returncode == 1, bad.stderr
    assert f"program verdict, hip: differs (on {WIDE}" in bad.stdout
    good = verify("vote_hip")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "porter verify: the hip port" in good.stdout
    assert (
        (tmp_path / "vote_hip" / "report.md")
        .read_text()
        .startswith(f"# Verification of `{HERE / 'vote_hip'}`")
    )
    missing = subprocess.run(
        [sys.executable, "-m", "porter", "verify", str(HERE / "vote_hip")], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "--against" in missing.stderr


def test_each_wave_size_hazard_of_the_port_is_proven_or_disproven_by_the_64_lane_run(tmp_path: Path) -> None:
    narrow = _verify(HERE / "vote_hip_ballot32", tmp_path / "a")
    said = [(h["line"], h["code"], str(h["at_64"])) for h in narrow.build["port_hazards"]]
    assert [(line, code) for line, code, _ in said] == [(8, "narrow-ballot"), (9, "narrow-ballot")]
    assert all(
        at.startswith("a defect: count_positive fails at 64 lanes (matches-reference") for *_, at in said
    )
    assert _verify(HERE / "vote_hip", tmp_path / "b").build["port_hazards"] == []
    # lane arithmetic tied to 32 that the program's launches never make wrong: flagged, and disproven
    harmless = _edited(tmp_path, "if (i < n) x[i] *= a;", "if (i < n && threadIdx.x % 32 < 64) x[i] *= a;")
    report = _verify(harmless, tmp_path / "c")
    assert [(h["line"], h["code"], h["at_64"]) for h in report.build["port_hazards"]] == [
        (15, "warp-size-assumption", "not a defect on the program's launches: scale validated at 64 lanes")
    ]
    from porter.report.program_view import markdown

    assert "| `main.hip:15` | warp-size-assumption: " in markdown(report)


def test_a_hip_1_port_with_hiplaunchparm_builds_runs_and_is_replayed_on_the_originals_launches(
    tmp_path: Path,
) -> None:
    """HIP 1.x ports (ROCm's HIP-Examples): kernels take ``hipLaunchParm lp`` first and are launched
    by ``hipLaunchKernel(k, grid, block, shared, stream, args...)``, which passed ``lp`` itself; a
    host file includes ``"hip_runtime.h"`` at the include root.  The program builds and matches, and
    each kernel matches the original's with ``lp`` left out and is replayed at both widths."""
    report = _verify(HERE / "vote_hip_launchparm", tmp_path)
    assert _runs(report) == {NARROW: "matches", WIDE: "matches"}
    for kernel in ("count_positive", "scale"):
        assert _replays(report, kernel) == {NARROW: "validated", WIDE: "validated"}
    assert {k.name: k.targets["hip"] for k in report.kernels} == {
        "count_positive": "matched: main.hip:9 of the port (its hipLaunchParm left out: HIP's hipLaunchKernel "
        "passed it)",
        "scale": "matched: main.hip:16 of the port (its hipLaunchParm left out: HIP's hipLaunchKernel passed it)",
    }
    assert report.exit_code == 0


def test_the_launch_parameter_is_taken_out_of_every_declaration_and_kept_as_a_local() -> None:
    from porter.workflows.verify import drop_launch_parm

    code = (
        "__global__ void k(hipLaunchParm lp, float* x);\n"
        "__global__ void k (hipLaunchParm lp,\n    float* x)\n{\n    x[0] = 1;\n}\n"
        "__global__ void only(hipLaunchParm lp) { }\n"
        "__global__ void kk(hipLaunchParm lp, float* x) { }\n"
    )
    out = drop_launch_parm(drop_launch_parm(code, "k"), "only")
    assert out.count("\n") == code.count("\n")  # line numbers unchanged
    assert "void k( float* x);" in out
    assert "void k (\n    float* x)\n{ hipLaunchParm lp = 0; (void)lp;\n" in out
    assert "void only() { hipLaunchParm lp = 0; (void)lp; }" in out
    assert "void kk(hipLaunchParm lp, float* x)" in out  # another kernel is left as it is


def test_a_port_that_reaches_a_header_in_a_folder_beside_it_through_minus_i(tmp_path: Path) -> None:
    """Suites keep shared headers beside the programs (`../common`): given with -I, the header is part
    of the port's copy and its units still build and run."""
    from porter.defines import BuildFlags

    port, common = tmp_path / "suite" / "port", tmp_path / "suite" / "common"
    common.mkdir(parents=True)
    shutil.copytree(HERE / "vote_hip", port)
    (common / "scaling.h").write_text("#pragma once\n#define SCALE_OF(a) (a)\n")
    text = (port / "main.hip").read_text()
    (port / "main.hip").write_text(
        text.replace(
            "#include <hip/hip_runtime.h>", '#include <hip/hip_runtime.h>\n#include "scaling.h"'
        ).replace("x[i] *= a;", "x[i] *= SCALE_OF(a);")
    )
    report = verify_program(
        [str(port)], [str(ORIGINAL)], flags=BuildFlags((str(common),)), out_dir=str(tmp_path / "out"),
        run=ProgramRuns(runs=("",), toolchains=("cpu-runtime",)),
    )  # fmt: skip
    assert _runs(report) == {NARROW: "matches", WIDE: "matches"}
    assert _replays(report, "scale") == {NARROW: "validated", WIDE: "validated"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # `#define warpSize 32` after the HIP header: the lane arithmetic reads 32 while the wavefront has 64
        (
            "#include <hip/hip_runtime.h>",
            "#include <hip/hip_runtime.h>\n#undef warpSize\n#define warpSize 32",
        ),
        # host code that picks the launch by the warp size, its 64-lane path never run on NVIDIA
        (
            "    hipLaunchKernelGGL(count_positive, dim3(blocks), dim3(threads), 0, 0, v, per_block, n);",
            "    hipDeviceProp_t prop;\n    hipGetDeviceProperties(&prop, 0);\n"
            "    if (prop.warpSize == 32)\n"
            "        hipLaunchKernelGGL(count_positive, dim3(blocks), dim3(threads), 0, 0, v, per_block, n);\n"
            "    else\n"
            "        hipLaunchKernelGGL(count_positive, dim3(blocks), dim3(threads / 2), 0, 0, v, per_block, n);",
        ),
    ],
    ids=["define-warpSize-32", "host-branch-on-warpSize"],
)
def test_the_other_seeded_wave_size_defects_are_caught_at_64_and_not_at_32(
    old: str, new: str, tmp_path: Path
) -> None:
    report = _verify(_edited(tmp_path, old, new), tmp_path / "v")
    assert _runs(report) == {NARROW: "matches", WIDE: "differs"}, report.verdicts()


def test_a_port_whose_kernel_file_includes_a_timer_header_calling_the_hip_runtime_is_replayed(
    tmp_path: Path,
) -> None:
    """A hand port's file of kernels includes a timing header (a class calling hipEventCreate /
    hipEventRecord / hipEventElapsedTime, an error check calling hipGetErrorString): the kernel's replay
    compiles that header as it is, against the host API porter_host_decls.h declares, so every kernel is
    validated at both widths -- not ``not-replayable`` because porter's replay build lacked the runtime."""
    report = _verify(HERE / "vote_hip_timer", tmp_path)
    assert _runs(report) == {NARROW: "matches", WIDE: "matches"}
    for kernel in ("count_positive", "scale"):
        assert _replays(report, kernel) == {NARROW: "validated", WIDE: "validated"}
    assert report.exit_code == 0
