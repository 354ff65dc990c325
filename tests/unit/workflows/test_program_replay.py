"""porter.workflows.program_replay: each captured kernel replayed from the plan, keyed on what it was
built from, reused from the ledger, and timed where the device's times mean something."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.programs import plant_port
from porter.backends import CompileOptions, Device

from porter.model import Variant
from porter.plan import PlannedVariant
from porter.report import program_view
from porter.results import KernelReplay
from porter.workflows import program_replay
from porter.workflows.program import Hooks, port_program
from porter.workflows.program_run import ProgramRuns

ROOT = Path(__file__).resolve().parents[3]
SMOOTH = ROOT / "samples" / "programs" / "smooth"
RUN = "./smooth data/values.txt 4"


def _variant(
    source: str = "__global__ void k(float* x) { x[0] = N; }",
    defines: tuple[str, ...] = ("N=4",),
    headers: str = "",
) -> PlannedVariant:
    variant = Variant("k", "hip", source, "k", "translate", "/out/hip/k.cu")
    return PlannedVariant(variant, CompileOptions(defines=defines), headers=headers)


def test_a_replay_key_changes_with_everything_the_verdict_depends_on() -> None:
    devices: list[Device] = []  # no device: no toolchain to name
    base = program_replay._key("k", _variant(), devices, ["run-1"])
    assert base and program_replay._key("k", _variant(), devices, ["run-1"]) == base
    others = [
        program_replay._key("k", _variant(defines=("N=8",)), devices, ["run-1"]),  # the unit's -D
        program_replay._key("k", _variant("__global__ void k(float* x) {}"), devices, ["run-1"]),  # the code
        program_replay._key("k", _variant(headers="h2"), devices, ["run-1"]),  # what it includes
        program_replay._key("k", _variant(), devices, ["run-2"]),  # the capture
        program_replay._key("k<int>", _variant(), devices, ["run-1"]),  # the instance
        program_replay._key(
            "k", replace(_variant(), variant=replace(_variant().variant, extra_args=({"kind": "local"},))),
            devices, ["run-1"],
        ),  # the launch mapping
    ]  # fmt: skip
    assert base not in others and len(set(others)) == len(others)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_validated_replays_are_timed_at_their_largest_captured_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on a GPU the port report times every validated replay; here the emulator stands in for one
    smooth = tmp_path / "smooth"
    shutil.copytree(SMOOTH, smooth)
    cpu = ProgramRuns((RUN,), toolchains=("cpu-runtime",))
    monkeypatch.setattr(program_replay, "timed_on", lambda device: device.label == "cpu:cpu-emulator")
    from porter.harness import bench

    timings: list[str] = []  # the variant of each timing child, in order

    def counted(variant: Variant, *args: Any, **kwargs: Any) -> Any:
        timings.append(variant.target)
        return real(variant, *args, **kwargs)

    real = bench.benchmark
    monkeypatch.setattr(bench, "benchmark", counted)
    report = port_program(
        [str(smooth)],
        ["hip"],
        out_dir=str(tmp_path / "out"),
        run=cpu,
        hooks=Hooks(markdown=program_view.markdown),
    )
    rows = [r for k in report.kernels for r in k.replays if r.device == "cpu:cpu-emulator"]
    assert rows and all(r.status == "validated" for r in rows), rows
    for r in rows:
        assert r.time_ms is not None and r.time_ms > 0 and r.time_iqr_ms is not None, r
        assert "n0=4000" in r.timed_at  # the run's own size (data/values.txt holds 4000 values)
    hip = next(r for r in rows if r.variant == "hip")
    assert hip.speedup is not None and hip.original_ms is not None and hip.time_ms is not None
    # the speedup is the two times shown: the original timed beside the port, same session and device
    assert hip.speedup == pytest.approx(hip.original_ms / hip.time_ms)
    # the original is timed once per launch and device: its own row's time is every port's baseline
    original = next(r for r in rows if r.variant == "original" and r.instance == hip.instance)
    assert hip.original_ms == original.time_ms
    assert sorted(timings) == sorted("cuda" if r.variant == "original" else r.variant for r in rows), timings
    md = (Path(report.out_dir) / "report.md").read_text()
    assert "time at the largest captured launch" in md and "x the original (" in md and "ms beside it)" in md
    # a re-run keeps the times with the verdicts it reuses (the ledger of the signed report)
    again = port_program([str(smooth)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    kept = [r for k in again.kernels for r in k.replays if r.device == "cpu:cpu-emulator"]
    assert all(r.resumed for r in kept) and [r.time_ms for r in kept] == [r.time_ms for r in rows]
    # --fresh: nothing lent, every replay made again
    fresh = port_program([str(smooth)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu, fresh=True)
    assert not any(r.resumed for k in fresh.kernels for r in k.replays)
    # a time taken while the GPU was not porter's alone is a measurement whose condition failed: a re-run
    # keeps the verdict and takes that time again (and only that one)
    real_timed, busy = program_replay._timed, "contended: other processes used the GPU: 4242 train.py"

    def hip_only(row: Any, *args: Any, **kwargs: Any) -> Any:
        return replace(real_timed(row, *args, **kwargs), contended=busy if row.variant == "hip" else "")

    monkeypatch.setattr(program_replay, "_timed", hip_only)
    port_program([str(smooth)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu, fresh=True)
    monkeypatch.setattr(program_replay, "_timed", real_timed)
    timings.clear()
    retimed = port_program([str(smooth)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    now = [r for k in retimed.kernels for r in k.replays if r.device == "cpu:cpu-emulator"]
    assert all(r.resumed and r.status == "validated" and not r.contended for r in now), now
    assert all(r.time_ms is not None and r.time_ms > 0 for r in now)
    # the port timed again, beside a fresh time of the original as its baseline; the original's own row kept
    ports = sum(r.variant == "hip" for r in now)
    assert ports and sorted(timings) == ["cuda"] * ports + ["hip"] * ports, timings


ORDERS = ROOT / "tests" / "fixtures" / "programs" / "replay_orders"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_launches_that_changed_nothing_and_a_compaction_in_varying_order_are_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "replay_orders"
    shutil.copytree(ORDERS, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip", "opencl"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = {k.name: k.replays for k in report.kernels}
    # a zero-fill into zeroed memory, a second identical launch, a clamp of values already in range:
    # each run again on poisoned memory and judged there, the original and both ports
    for name in ("zero_fill", "square", "clamp01"):
        assert {r.variant for r in rows[name]} == {"original", "hip", "opencl"}, rows[name]
        assert all(r.status == "validated" and "run on poisoned outputs" in r.reason for r in rows[name]), (
            rows[name]
        )
    assert "2 captured launch(es) (1 of them run on poisoned outputs" in rows["square"][0].reason
    # a kernel that never writes: said so, with what was tried
    assert all(r.status == "not-replayable" for r in rows["watch"])
    assert "it changed no element of any array even when poisoned" in rows["watch"][0].reason
    # the compaction's slots depend on the order blocks run: compared as a count and a set, and named
    kept = rows["keep_positive"]
    assert {r.variant for r in kept} == {"original", "hip", "opencl"}, kept
    assert all(r.status == "validated" for r in kept), kept
    assert all("arg1 compared as a count (arg2) and a set" in r.reason for r in kept), kept
    # the original's verdict kept from the ledger, the ports judged again: by the same comparison
    real_key = program_replay._key
    monkeypatch.setattr(
        program_replay,
        "_key",
        lambda name, planned, *a: (
            real_key(name, planned, *a) + ("" if planned.variant.provenance == "original" else "x")
        ),
    )
    again = port_program([str(src)], ["hip", "opencl"], out_dir=str(tmp_path / "out"), run=cpu)
    kept = next(k.replays for k in again.kernels if k.name == "keep_positive")
    assert all(
        r.status == "validated" and "compared as a count (arg2) and a set" in r.reason for r in kept
    ), kept
    assert [r.resumed for r in kept if r.variant == "original"] == [True]
    assert not any(r.resumed for r in kept if r.variant != "original")


ORDERS_TWO_UNITS = ROOT / "tests" / "fixtures" / "programs" / "orders_two_units"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_compaction_is_judged_in_a_program_whose_other_unit_holds_a_constant_table(tmp_path: Path) -> None:
    # the capture records bias.cu's __constant__ table at every launch; the compaction's own program (main.cu)
    # does not define it, and the original's own runs that settle its order failed to load: "no global
    # symbol 'bias' in keep_positive's program" (rodinia's hybridsort: bucketcount beside constStartAddr)
    src = tmp_path / "orders_two_units"
    shutil.copytree(ORDERS_TWO_UNITS, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = {k.name: k.replays for k in report.kernels}
    kept = rows["keep_positive"]
    assert {r.variant for r in kept} == {"original", "hip"}, kept
    assert all(r.status == "validated" for r in kept), kept
    assert all("arg1 compared as a count (arg2) and a set" in r.reason for r in kept), kept
    assert all(r.status == "validated" for r in rows["add_bias"]), rows["add_bias"]


SHARED = ROOT / "tests" / "fixtures" / "programs" / "shared_allocations"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_arguments_into_one_allocation_are_replayed_as_one_buffer_and_a_wrong_half_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "shared_allocations"
    shutil.copytree(SHARED, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip", "opencl"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = {k.name: k.replays for k in report.kernels}
    # the two halves of one cudaMalloc (1024 bytes apart, then 1036: held back) and the stencil on a + 1
    # and a (4 bytes apart): the original and both ports validated on the emulator and on OpenCL
    for name in ("halves", "pairs"):
        assert {r.variant for r in rows[name]} == {"original", "hip", "opencl"}, rows[name]
        for r in rows[name]:
            assert r.status == "validated" or (
                # an OpenCL device without shared virtual memory cannot point 4 bytes into a buffer
                r.status == "compiled" and "no shared virtual memory" in r.reason
            ), r
        assert any(r.device.startswith("opencl:") and r.status == "validated" for r in rows[name])
    assert rows["halves"][0].held_back == 1
    # a HIP port that writes the input's half instead of the output's: the allocation is compared whole
    plant_port(
        monkeypatch, "hip", lambda text: text.replace("out[i] = 2.0f", "((float*)in)[i] = 2.0f"), "halves"
    )
    again = port_program([str(src)], ["hip", "opencl"], out_dir=str(tmp_path / "planted"), run=cpu)
    hip = [r for k in again.kernels if k.name == "halves" for r in k.replays if r.variant == "hip"]
    assert hip and all(r.status == "failed" and "matches-reference" in r.reason for r in hip), hip


HEADER_KERNELS = ROOT / "tests" / "fixtures" / "programs" / "header_kernels"


def test_a_captured_instance_goes_to_its_template_kernel_or_else_to_the_instance_listed() -> None:
    from porter.results import ProgramKernel

    # the OpenCL translation of a template in a header lists its instances only (no `twice`): each
    # captured instance is its own kernel's (they were "not a kernel porter found in the program")
    listed = {n: ProgramKernel(n, "main.cu", 0) for n in ("twice<float>", "twice<double>", "scale")}
    assert program_replay.kernel_of("twice<float>", listed) is listed["twice<float>"]
    assert program_replay.kernel_of("twice< double >", listed) is listed["twice<double>"]
    assert program_replay.kernel_of("scale", listed) is listed["scale"]
    assert program_replay.kernel_of("twice<int>", listed) is None
    # the capture spells an unsigned template argument as the compiler does (reduction's reduce7)
    red = {n: ProgramKernel(n, "k.cu", 0) for n in ("reduce7<int, 256, true>", "reduce7<int, 2560, true>")}
    assert program_replay.kernel_of("reduce7<int, 256u, true>", red) is red["reduce7<int, 256, true>"]
    assert program_replay.kernel_of("reduce7<int, 25u, true>", red) is None
    # a template listed beside an instance (matrixMul's MatrixMulCUDA<16>): the rows stay the template's
    both = {n: ProgramKernel(n, "main.cu", 0) for n in ("MatrixMulCUDA", "MatrixMulCUDA<16>")}
    assert program_replay.kernel_of("MatrixMulCUDA<16>", both) is both["MatrixMulCUDA"]


def test_the_scan_of_an_instance_listed_under_its_unit_is_its_templates_in_the_header() -> None:
    from porter.program import discover
    from porter.workflows.program_plan import ProgramPlan

    program = discover([str(HEADER_KERNELS)], include_dirs=[str(HEADER_KERNELS / "include")])
    plan = ProgramPlan(program)
    found = program_replay.kernel_scan(plan, "twice<double>", "main.cu")  # defined in include/kern.cuh
    assert found is not None and found.name == "twice" and found.template_params == ("typename T",)
    sums = program_replay.kernel_scan(plan, "scaled_sums", "main.cu")
    assert sums is not None and [p.written for p in sums.params] == [False, True, False]
    assert program_replay.kernel_scan(plan, "absent", "main.cu") is None


PARTIAL_WARP = ROOT / "tests" / "fixtures" / "programs" / "partial_warp_sum"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_partial_warp_sum_and_an_arch_path_replay_as_the_captured_run_took_them(tmp_path: Path) -> None:
    src = tmp_path / "partial_warp_sum"
    shutil.copytree(PARTIAL_WARP, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    original = report.runs[0].original
    # lanes outside the shuffle's mask read 0, as on NVIDIA GPUs: the program's own check passes
    assert original is not None and original.exit == 0 and "PASS" in original.stdout_tail, original
    rows = [r for k in report.kernels for r in k.replays]
    at32 = [r for r in rows if r.instance == "chunk_max" and r.device == "cpu:cpu-emulator"]
    # the capture took the program build's path (fewer items per thread without __CUDA_ARCH__); the
    # replay compiles the kernel the same way, so the original reproduces it and the port is judged
    assert {r.variant for r in at32} == {"original", "hip"}, rows
    assert all(r.status == "validated" for r in at32), at32
    for name in ("block_sum<int>", "block_sum<float>"):
        # the program build's path shuffles for ints too (the sm_80 path's __reduce_add_sync reads no lane
        # outside its mask): the original's result depends on lanes CUDA leaves undefined, which its replay
        # names; it and its port are then judged with those lanes reading 0 and a poison pattern (issue #29)
        mine = [r for r in rows if r.instance == name]
        (original,) = [r for r in mine if r.variant == "original"]
        assert original.status == "validated", original
        assert "(the original's defect: reads shuffle lanes CUDA leaves undefined (lane " in original.reason
        assert "through __shfl_down_sync with mask 0xff: outside its mask" in original.reason, original
        ports = [r for r in mine if r.variant == "hip"]
        assert ports and all(r.status == "validated" for r in ports), ports
        assert any("undefined-lanes" in r.checks for r in ports), ports


STRUCT_FIELDS = ROOT / "tests" / "fixtures" / "programs" / "struct_fields"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_arrays_of_double_structs_are_compared_field_by_field_and_a_wrong_field_still_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "struct_fields"
    shutil.copytree(STRUCT_FIELDS, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    edit = {"from": "b.mass / 7.0", "to": "b.mass * (1.0 / 7.0)"}  # the last bit of many a double
    plant_port(monkeypatch, "hip", lambda text: text.replace(edit["from"], edit["to"]), "advance")
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = {k.name: [r for r in k.replays if r.device == "cpu:cpu-emulator"] for k in report.kernels}
    # the port rounds x / 7 differently in the last bit: within float64's tolerance, field by field
    assert all(r.status == "validated" for r in rows["advance"]), rows["advance"]
    assert all("arg1 (Body) compared field by field as float64" in r.reason for r in rows["advance"])
    # a struct of an int and a float is still compared byte for byte (no field-by-field note)
    assert all(r.status == "validated" and "(Tally)" not in r.reason for r in rows["tally"]), rows["tally"]
    # a port that writes y into z is caught however its fields are compared
    edit.update({"from": "b.z = b.z * 0.5", "to": "b.z = b.y * 0.5"})
    wrong = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "wrong"), run=cpu)
    hip = [r for k in wrong.kernels if k.name == "advance" for r in k.replays if r.variant == "hip"]
    assert hip and all(r.status == "failed" and "matches-reference" in r.reason for r in hip), hip


INCLUDED_DRIVER = ROOT / "tests" / "fixtures" / "programs" / "included_driver"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_kernel_launched_from_an_included_drivers_host_code_is_replayed(tmp_path: Path) -> None:
    # main.cu includes driver.cu, which includes the kernel and launches it from a host function: the
    # kernel's own build once refused that launch as dynamic parallelism, then could not compile it
    src = tmp_path / "included_driver"
    shutil.copytree(INCLUDED_DRIVER, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = [r for k in report.kernels if k.name == "relax" for r in k.replays]
    assert {r.variant for r in rows} == {"original", "hip"}, rows
    assert all(r.status == "validated" for r in rows), rows
    assert (src / "driver.cu").read_text().count("<<<") == 1  # the user's file as it was


def test_kernels_are_judged_side_by_side_only_while_cores_are_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """side_by_side: every piece runs once; up to `most` at once while the load average leaves a core idle,
    one at a time when the machine is busy (programs of a suite already fill it); the first error is raised
    and what had not started never starts."""
    import threading
    import time

    def pieces(count: int, seen: list[int], fail: int = -1) -> list[Callable[[], None]]:
        lock, now = threading.Lock(), [0]

        def piece(i: int) -> None:
            with lock:
                now[0] += 1
                seen.append(now[0])
            time.sleep(0.05)
            with lock:
                now[0] -= 1
            if i == fail:
                raise RuntimeError(f"piece {i} failed")

        return [functools.partial(piece, i) for i in range(count)]

    monkeypatch.setattr(program_replay, "IDLE_POLL_S", 0.01)
    monkeypatch.setattr(program_replay.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(program_replay.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    idle: list[int] = []
    program_replay.side_by_side(pieces(7, idle), 3)
    assert len(idle) == 7 and max(idle) == 3
    monkeypatch.setattr(program_replay.os, "getloadavg", lambda: (31.0, 30.0, 20.0))
    busy: list[int] = []
    program_replay.side_by_side(pieces(4, busy), 3)
    assert busy == [1, 1, 1, 1]
    failing: list[int] = []
    with pytest.raises(RuntimeError, match="piece 0 failed"):
        program_replay.side_by_side(pieces(5, failing, fail=0), 1)
    assert len(failing) == 1


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_kernels_judged_side_by_side_give_the_rows_of_one_after_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five kernels judged four at a time (an idle machine) and one at a time (a busy one): the same
    verdicts, in the same order, in report.json."""
    src = tmp_path / "replay_orders"
    shutil.copytree(ORDERS, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))

    def rows(load: float, out: str) -> list[tuple[str, str, str, str, str]]:
        monkeypatch.setattr(program_replay.os, "getloadavg", lambda: (load, load, load))
        report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / out), run=cpu, jobs=4)
        return [
            (k.name, r.instance, r.variant, r.device, r.status) for k in report.kernels for r in k.replays
        ]

    side_by_side, one_by_one = rows(0.0, "idle"), rows(1000.0, "busy")
    assert len({name for name, *_ in side_by_side}) == 5
    assert side_by_side == one_by_one


# A stencil of ours that reads one element before its input at the left edge (the shape of srad's top-edge read,
# written here): the original steps out of bounds, and so does its faithful port.
LEFT_EDGE = """#include <cstdio>
__global__ void smear(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 0.0f * x[i - 1];
}
int main() {
  const int n = 64;
  float h[n], *x, *y;
  for (int i = 0; i < n; ++i) h[i] = 0.5f * i;
  cudaMalloc(&x, sizeof h);
  cudaMalloc(&y, sizeof h);
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  smear<<<2, 32>>>(x, y, n);
  cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  printf("%g %g\\n", h[1], h[63]);
  return 0;
}
"""


# The shape of srad's top edge, written here: every thread reads the element before its own into shared memory,
# and the first thread overwrites what it read from x[-1] before anything uses it.  4 KiB arrays: an OpenCL CPU
# runtime uses them in place (Intel's copies a smaller one, where porter's guard zones cannot see the read).
TOP_EDGE = (
    LEFT_EDGE.replace("const int n = 64;", "const int n = 1024;").replace(
        "smear<<<2, 32>>>", "smear<<<32, 32>>>"
    )
).replace(
    "  if (i < n) y[i] = x[i] + 0.0f * x[i - 1];",
    """  __shared__ float before[32];
  before[threadIdx.x] = i < n ? x[i - 1] : 0.0f;
  if (i == 0) before[threadIdx.x] = 0.0f;
  __syncthreads();
  if (i < n) y[i] = x[i] + before[threadIdx.x];""",
)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_an_out_of_bounds_read_whose_value_is_never_used_still_lets_the_kernel_be_judged(
    tmp_path: Path,
) -> None:
    """The guard zone stops the original at x[-1]; run again with the bytes there readable, 0xFF and then 0x5A,
    its outputs are the same: they do not depend on the read, the original validates and its ports are judged,
    each verdict naming the read.  (The test below: a result that does depend on it stays failed.)"""
    assert TOP_EDGE != LEFT_EDGE
    src = tmp_path / "top_edge"
    src.mkdir()
    (src / "main.cu").write_text(TOP_EDGE)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip", "opencl"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = next(k.replays for k in report.kernels if k.name == "smear")
    checked = [r for r in rows if r.device == "opencl:oclgrind"]  # a checker stops at any read out of bounds
    judged = [r for r in rows if r not in checked]
    assert judged and all(r.status == "validated" for r in judged), [
        (r.variant, r.device, r.reason) for r in rows
    ]
    emulated = [r for r in judged if r.device.startswith("cpu:")]
    assert {r.variant for r in emulated} == {"original", "hip"}, rows
    for r in emulated:  # the emulator's guard zones saw the read: each verdict says so
        assert "out-of-bounds-reads" in r.checks, r
        assert "it reads out of bounds (arg0[-1] before its first element)" in r.reason, r.reason
    for (
        r
    ) in checked:  # Oclgrind stops the port at the read the original makes too: its defect, not the port's
        assert r.status == "not-replayable", r
        assert r.reason.startswith(
            "the original kernel reads out of bounds too (arg0[-1] before its first"
        ), r
    counts = report.kernel_counts()
    assert counts["hip"]["validated"] == counts["opencl"]["validated"] == 1
    assert counts["hip"]["failed"] == counts["opencl"]["failed"] == 0


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_port_that_keeps_the_originals_out_of_bounds_read_is_not_failed_for_it(tmp_path: Path) -> None:
    """The original reads x[-1]: its guard page stops it on the CPU emulator, its row fails with the finding,
    and with no device where it validates the ports are not judged (not replayable, naming it).  Where it
    validates on one device (a GPU) and steps out on another, a port doing the same there is not replayable
    with the original's finding, not failed; a port stepping out where the original does not still fails."""
    src = tmp_path / "left_edge"
    src.mkdir()
    (src / "main.cu").write_text(LEFT_EDGE)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = next(k.replays for k in report.kernels if k.name == "smear")
    original = [r for r in rows if r.variant == "original"]
    assert original and all(r.status == "failed" for r in original), original
    finding = "guard: out-of-bounds read: arg0[-1] read before its first element"
    assert original[0].reason.startswith(finding)
    # 0.0f * x[-1] is NaN where x[-1] is: run again with the bytes there readable, 0xFF (NaN) and 0x5A, its
    # outputs differ, so the read is no detail and the guard's verdict stands
    assert "its outputs depend on what it reads there: array output 2 differs" in original[0].reason, original
    hip = [r for r in rows if r.variant == "hip"]
    assert hip and all(r.status == "not-replayable" and finding in r.reason for r in hip), hip
    assert report.kernel_counts()["hip"]["failed"] == 0
    # the original validated on a GPU and stopped by the guard on the emulator (srad on the H100)
    gpu = KernelReplay("original", "cuda:NVIDIA H100 80GB HBM3", "validated", "matches", instance="smear")
    ported = [
        KernelReplay("hip", "hip:NVIDIA H100 80GB HBM3", "validated", "matches", instance="smear"),
        KernelReplay("hip", "cpu:cpu-emulator", "failed", original[0].reason, instance="smear"),
        KernelReplay("hip", "cpu:cpu-emulator-wave64", "failed", original[0].reason, instance="smear"),
    ]
    judged = program_replay._originals_defect(ported, [gpu, original[0]])
    assert [r.status for r in judged] == ["validated", "not-replayable", "not-replayable"]
    assert judged[1].reason.startswith(
        f"the original kernel fails the same way on cpu:cpu-emulator ({finding}"
    )
    elsewhere = replace(ported[1], reason="guard: out-of-bounds read: arg0[64] read past its 64 elements (x)")
    assert program_replay._originals_defect([elsewhere], [gpu, original[0]])[0].status == "failed"
    # another element before the first, where another device's work-items ran in another order: the same defect
    first_hit = original[0].reason.replace("arg0[-1]", "arg0[-3]")
    assert first_hit != original[0].reason
    ocl = KernelReplay("opencl", "opencl:intel", "failed", first_hit, instance="smear")
    assert program_replay._originals_defect([ocl], [gpu, original[0]])[0].status == "not-replayable"
    # a write there, or a read before another array, is not the original's
    for other in (first_hit.replace(" read", " write", 1).replace("] read", "] written"),
                  first_hit.replace("arg0[-3]", "arg1[-3]")):  # fmt: skip
        assert other != first_hit
        row = replace(ocl, reason=other)
        assert program_replay._originals_defect([row], [gpu, original[0]])[0].status == "failed", other


def test_a_ports_failure_is_the_originals_where_the_original_fails_that_check_on_such_a_device() -> None:
    """myocyte on the H100: the original validated on the GPU and raced on the emulator; the ports raced on the
    emulator, its 64-lane twin and Intel's CPU device (the original does not run on those two: a CPU device
    like the emulator), and one port failed matches-reference on the GPU, where the original passed."""
    race = "deterministic: arg2[0] differs between two runs on the same input (0 vs 15.2; 1 elements differ)"
    original = [
        KernelReplay("original", "cuda:H100", "validated", "matches", instance="kernel"),
        KernelReplay("original", "cpu:cpu-emulator", "failed", race, instance="kernel"),
    ]
    kinds = {"cuda:H100": "gpu", "cpu:cpu-emulator": "emulator", "cpu:cpu-emulator-wave64": "emulator"}
    kinds |= {"opencl:intel": "cpu", "opencl:H100": "gpu", "hip:H100": "gpu"}
    ports = [
        KernelReplay("hip", "hip:H100", "validated", "matches", instance="kernel"),
        KernelReplay("hip", "cpu:cpu-emulator", "failed", race, instance="kernel"),
        KernelReplay("hip", "cpu:cpu-emulator-wave64", "failed", race, instance="kernel"),
        KernelReplay("opencl", "opencl:intel", "failed", race, instance="kernel"),
        KernelReplay(
            "opencl", "opencl:H100", "failed", "matches-reference: arg2[7] = 7.067", instance="kernel"
        ),
    ]
    judged = program_replay._originals_defect(ports, original, kinds)
    assert [r.status for r in judged] == [
        "validated",
        "not-replayable",
        "not-replayable",
        "not-replayable",
        "failed",
    ]
    assert judged[1].reason.startswith(
        "the original kernel fails the same way on cpu:cpu-emulator (deterministic:"
    )


WARP_TAGGED = ROOT / "tests" / "fixtures" / "programs" / "warp_tagged_histogram"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="needs oclgrind, the OpenCL checking device")
def test_a_race_the_original_has_is_named_as_its_own_and_a_port_that_drops_a_barrier_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the warps' tagged counters race by design (rodinia's hybridsort: bucketcount, histogram1024Kernel):
    # Oclgrind's race in the OpenCL port is the original's, so its row cannot judge the port; the other
    # OpenCL devices do
    src = tmp_path / "warp_tagged_histogram"
    shutil.copytree(WARP_TAGGED, src)
    cpu = ProgramRuns(("",), toolchains=("cpu-runtime",))
    report = port_program([str(src)], ["opencl"], out_dir=str(tmp_path / "out"), run=cpu)
    rows = {r.device: r for k in report.kernels if k.name == "histogram" for r in k.replays}
    checker = rows["opencl:oclgrind"]
    assert checker.status == "not-replayable", checker
    assert (
        checker.reason.startswith("the original's own race: ")
        and "`tagged_add` (main.cu line 14)" in checker.reason
    )
    assert "two threads of one warp" in checker.reason and "oclgrind: data-race: Read-write" in checker.reason
    judged = [r for d, r in rows.items() if d.startswith("opencl:") and d != "opencl:oclgrind"]
    assert judged and all(r.status == "validated" for r in judged), judged
    assert rows["cpu:cpu-emulator"].status == "validated"

    # the same port with the kernel's last barrier dropped: the sums race with the counting, a race the original
    # does not have -- the checker's row fails the port
    def last_barrier_dropped(text: str) -> str:
        at = text.index("barrier(", text.index("barrier(", text.index("histogram(")) + 1)
        return text[:at] + "/* dropped */" + text[text.index(";", at) + 1 :]

    plant_port(monkeypatch, "opencl", last_barrier_dropped)
    again = port_program([str(src)], ["opencl"], out_dir=str(tmp_path / "planted"), run=cpu)
    checked = [r for k in again.kernels for r in k.replays if r.device == "opencl:oclgrind"]
    assert checked and all(r.status == "failed" and ": data-race: " in r.reason for r in checked), checked


def test_a_port_reading_undefined_lanes_otherwise_where_they_are_not_counted_is_not_replayable_there() -> (
    None
):
    """The CUDA samples' reduce7<int, 4u> on Intel's CPU runtime: the original depends on shuffle lanes CUDA leaves
    undefined; the OpenCL port, whose reads of them that device does not count, matches the original with them
    read as 0 and not with them poisoned (it adds the poison 2 times where the original adds it 17).  Not
    replayable there, both said; any other failure stays failed."""
    from porter.harness.validate import READ_ELSEWHERE

    said = f"undefined: with the shuffle lanes ... its outputs differ from the original's: arg1[0] = -7; {READ_ELSEWHERE}"
    row = KernelReplay(
        "opencl", "opencl:Intel(R) Xeon(R) Processor", "failed", said, instance="reduce7<int, 4u, true>"
    )
    (judged,) = program_replay._read_elsewhere([row])
    assert judged.status == "not-replayable"
    assert judged.reason.startswith(
        "the original's result depends on shuffle lanes CUDA leaves undefined, which the port reads otherwise on "
        "opencl:Intel(R) Xeon(R) Processor (undefined: "
    )
    plain = replace(row, reason="matches-reference: arg1[0] = -7, expected 8")
    assert program_replay._read_elsewhere([plain])[0].status == "failed"
