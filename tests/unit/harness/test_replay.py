"""porter.harness.replay: variants judged on the launches a program's own run captured."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fakes.children import ChildJobs
from porter.backends import CompileOptions, get_dialect

from porter import capture
from porter.harness import replay
from porter.harness.trial import ValidateOptions
from porter.model import Role, Status, Variant
from porter.plan import run_devices
from porter.scan.extract import device_code
from porter.workflows.capture import capture_program
from porter.workflows.program_run import ProgramRuns

ROOT = Path(__file__).resolve().parents[3]
TOUR = ROOT / "tests" / "fixtures" / "programs" / "capture_tour"
SMOOTH = ROOT / "samples" / "programs" / "smooth"
pytestmark = pytest.mark.integration  # builds and runs programs with g++, kernels on the emulator


def _captured(tmp: Path, source: Path, runs: list[str]) -> dict[str, list[capture.Launch]]:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found (apt-get install g++)")
    shutil.copytree(source, tmp / "prog")
    small = ProgramRuns(tuple(runs), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2))
    report = capture_program([str(tmp / "prog")], small, out_dir=str(tmp / "cap"))
    assert report.exit_code == 0, report
    return capture.by_kernel(capture.load(tmp / "cap").launches)


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[capture.Launch]]:
    return _captured(tmp_path_factory.mktemp("tour"), TOUR, ["./main"])


@pytest.fixture(scope="module")
def smooth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[capture.Launch]]:
    # two runs: 4000 values, then 2000 -- the second run's launches are held back
    return _captured(
        tmp_path_factory.mktemp("smooth"),
        SMOOTH,
        ["./smooth data/values.txt 4", "./smooth data/values.txt 2"],
    )


def _cpu() -> list:  # the emulator: CUDA and HIP kernels on this CPU
    devices = [d for d in run_devices("cuda") if d.backend == "cpu"]
    if not devices:
        pytest.skip("the CPU emulator is not available here")
    return devices


def _judge(variant: Variant, rep: replay.Replay, include: tuple[str, ...] = ()):
    opts = ValidateOptions(compile=CompileOptions(include_dirs=include))
    (verdict,) = replay.replay(variant, rep, _cpu(), opts)
    return verdict


def test_a_kernel_launched_ten_times_is_judged_on_its_kept_launches(tour) -> None:
    rep = replay.build("scale", tour["scale"])
    assert rep.spec is not None and len(rep.instances) == 3 and not rep.left_out
    x, a, n = rep.spec.args
    assert (x.dtype, x.role, a.role, n.dtype) == ("float32", Role.INOUT, Role.SCALAR, "int32")
    source = (TOUR / "main.cu").read_text()
    good = _judge(Variant("scale", "cuda", device_code(source), "scale", "original"), rep)
    assert good.status is Status.VALIDATED, good.reason
    assert "3 captured launch(es)" in good.reason and "inputs-unchanged" in good.checks
    bad = source.replace("x[i] * a + 1.0f", "x[i] * a + 1.001f")
    rejected = _judge(Variant("scale", "cuda", device_code(bad), "scale", "user"), rep)
    assert rejected.status is Status.FAILED and rejected.reason.startswith("matches-reference"), (
        rejected.reason
    )


def test_the_kept_launches_of_a_kernel_run_in_one_child_and_each_is_judged_by_its_own_result(
    tour, child_jobs: ChildJobs
) -> None:
    """One child compiles, loads and runs the three kept launches (Job.sets), then each launch's outputs are
    compared with what that launch left: the ten launches scale x again and again, so a launch judged by
    another's result would fail.  A result recorded wrong for the second launch fails it there, by name."""
    rep = replay.build("scale", tour["scale"])
    assert rep.spec is not None and len(rep.instances) == 3
    labels = [inst.label for inst in rep.instances]
    assert len({rep.recorded[label][0].tobytes() for label in labels}) == 3  # three different results
    original = Variant("scale", "cuda", device_code((TOUR / "main.cu").read_text()), "scale", "original")
    good = _judge(original, rep)
    assert good.status is Status.VALIDATED and "3 captured launch(es)" in good.reason, good.reason
    assert child_jobs.sets == [2] * len(_cpu())  # one child per device for the three launches
    wrong = {**rep.recorded, labels[1]: [a + 1 for a in rep.recorded[labels[1]]]}
    bad = _judge(original, replace(rep, recorded=wrong))
    assert bad.status is Status.FAILED and bad.reason.startswith("matches-reference"), bad.reason
    assert labels[1] in bad.reason and labels[0] not in bad.reason, bad.reason


def test_launches_whose_child_did_not_end_well_together_run_again_one_at_a_time(
    tour, child_jobs: ChildJobs
) -> None:
    """A child running the kept launches together that fails (here: told so) says nothing of which launch:
    each runs again alone, as before, and is judged on its own."""
    rep = replay.build("scale", tour["scale"])
    child_jobs.fail_together = True
    original = Variant("scale", "cuda", device_code((TOUR / "main.cu").read_text()), "scale", "original")
    good = _judge(original, rep)
    assert good.status is Status.VALIDATED and "3 captured launch(es)" in good.reason, good.reason
    assert child_jobs.sets == [2, 0, 0, 0] * len(_cpu())


def test_a_variant_that_does_not_compile_fails_every_kept_launch_from_one_child(
    tour, child_jobs: ChildJobs
) -> None:
    """A compile shared by the launches run together fails them all alike: no launch is run again alone."""
    rep = replay.build("scale", tour["scale"])
    source = device_code((TOUR / "main.cu").read_text()).replace("x[i] * a + 1.0f", "x[i] * a + undeclared")
    broken = _judge(Variant("scale", "cuda", source, "scale", "user"), rep)
    assert broken.status is Status.FAILED and broken.reason.startswith("compile"), broken.reason
    assert child_jobs.sets == [2] * len(_cpu())


def test_a_template_kernel_is_replayed_as_the_instantiation_its_launch_names(tour) -> None:
    rep = replay.build("ramp<32>", tour["ramp<32>"])
    assert rep.spec is not None and rep.instances[0].size["n0"] == 128
    source = (TOUR / "main.cu").read_text()
    verdict = _judge(Variant("ramp<32>", "cuda", device_code(source), "ramp<32>", "original"), rep)
    assert verdict.status is Status.VALIDATED, verdict.reason
    wrong = source.replace("(float)(i % WIDTH) / WIDTH", "(float)(i % WIDTH) / 32.5f")
    assert (
        _judge(Variant("ramp<32>", "cuda", device_code(wrong), "ramp<32>", "user"), rep).status
        is Status.FAILED
    )


def test_a_kernel_reading_a_constant_table_is_replayed_with_the_programs_values(tour) -> None:
    rep = replay.build("gain", tour["gain"])
    assert rep.spec is not None and {c.name for c in rep.spec.constants} == {"c_gain", "hits"}
    source = (TOUR / "main.cu").read_text()
    good = _judge(Variant("gain", "cuda", device_code(source), "gain", "original"), rep)
    assert good.status is Status.VALIDATED, good.reason
    shifted = source.replace("c_gain[i % 4]", "c_gain[(i + 1) % 4]")
    bad = _judge(Variant("gain", "cuda", device_code(shifted), "gain", "user"), rep)
    assert bad.status is Status.FAILED and bad.reason.startswith("matches-reference"), bad.reason
    # a kernel writing a __device__ variable: variables are not compared yet, so it is not judged
    assert "writes the __device__ variable hits" in replay.build("count", tour["count"]).problem


def test_a_float_atomic_sum_is_compared_with_an_order_aware_tolerance(tour) -> None:
    rep = replay.build("total", tour["total"], atomics=("atomicAdd",))
    assert rep.spec is not None and rep.spec.float_atomics
    assert not replay.build("total", tour["total"]).spec.float_atomics  # no atomics named: exact
    source = (TOUR / "main.cu").read_text()
    verdict = _judge(Variant("total", "cuda", device_code(source), "total", "original"), rep)
    assert verdict.status is Status.VALIDATED, verdict.reason
    doubled = source.replace("atomicAdd(sum, x[i])", "atomicAdd(sum, 2.0f * x[i])")
    assert (
        _judge(Variant("total", "cuda", device_code(doubled), "total", "user"), rep).status is Status.FAILED
    )


def test_launches_that_cannot_be_replayed_say_why(tour) -> None:
    assert "holds a device pointer" in replay.build("touch", tour["touch"]).problem
    # accumulate(d, d + n, n): two halves of one allocation are one buffer now; into zeroed memory it
    # changed nothing, so without the original to poison it with the launch proves nothing
    halves = replay.build("accumulate", tour["accumulate"])
    assert halves.spec is None and "changed any array" in halves.problem, halves.problem
    assert "capture limit" in replay.build("fill", tour["fill"]).problem
    nothing = replay.build("nothing", tour["nothing"])
    assert nothing.spec is None and "changed any array" in nothing.problem
    assert any("not a device allocation" in w for w in nothing.left_out)
    (verdict,) = replay.replay(
        Variant("touch", "cuda", "", "touch", "original"), replay.build("touch", tour["touch"]), []
    )
    assert verdict.status is Status.FAILED and verdict.reason.startswith("not replayable")
    # a pointer into the middle of an allocation: the array starts where the pointer does
    shift = replay.build("shift", tour["shift"])
    assert shift.spec is not None and shift.instances[0].size["n0"] == 192


def test_a_buffer_passed_twice_is_one_buffer_in_the_replay(tour) -> None:
    rep = replay.build("blend", tour["blend"])
    assert rep.spec is not None, rep.problem
    a, out, _, _ = rep.spec.args
    # the first parameter holds the buffer (changed: in and out); the second names it again
    assert a.role is Role.INOUT and out.role is Role.SCALAR
    assert "arg1 is arg0 again (one buffer passed twice)" in rep.spec.notes
    source = (TOUR / "main.cu").read_text()
    good = _judge(Variant("blend", "cuda", device_code(source), "blend", "original"), rep)
    assert good.status is Status.VALIDATED, good.reason
    # a port that reads a copy (as if the two arguments were distinct buffers) still sees the same
    # values here; one that reads the neighbour changes the result and is rejected
    bad = source.replace("w * a[i] * a[i] + out[i]", "w * a[i] * a[(i + 1) % n] + out[i]")
    rejected = _judge(Variant("blend", "cuda", device_code(bad), "blend", "user"), rep)
    assert rejected.status is Status.FAILED, rejected.reason


def test_a_struct_by_value_is_passed_with_its_captured_bytes(tour) -> None:
    rep = replay.build("apply", tour["apply"])
    assert rep.spec is not None, rep.problem
    p, y = rep.spec.args
    assert p.role is Role.SCALAR and y.role is Role.INOUT
    (value,) = [v for v in rep.instances[0].values if not hasattr(v, "shape") or v.shape == ()]
    assert value.dtype.itemsize == 16 and value.dtype.alignment == 8  # {int, float, double}
    source = (TOUR / "main.cu").read_text()
    good = _judge(Variant("apply", "cuda", device_code(source), "apply", "original"), rep)
    assert good.status is Status.VALIDATED, good.reason
    bad = source.replace("p.scale * y[i] + (float)p.offset", "p.scale * y[i] - (float)p.offset")
    assert _judge(Variant("apply", "cuda", device_code(bad), "apply", "user"), rep).status is Status.FAILED


def test_a_hip_port_assuming_32_lanes_passes_at_32_and_is_rejected_at_64(tmp_path: Path) -> None:
    from porter.plan import wavefront_devices

    launches = _captured(tmp_path, ROOT / "tests" / "fixtures" / "programs" / "warp_vote", ["./main"])
    rep = replay.build("positives_per_warp", launches["positives_per_warp"])
    source = (ROOT / "tests" / "fixtures" / "programs" / "warp_vote" / "main.cu").read_text()
    hip = get_dialect("hip").translate(source, "main.cu", ()).text
    wave = wavefront_devices("hip")
    assert [d.facts.warp_size for d in wave] == [64]
    variant = Variant("positives_per_warp", "hip", device_code(hip), "positives_per_warp", "translate")
    at32, at64 = replay.replay(variant, rep, [*_cpu(), *wave])
    assert at32.status is Status.VALIDATED, at32.reason
    assert at64.device == "cpu:cpu-emulator-wave64" and at64.status is Status.FAILED
    assert at64.reason.startswith("matches-reference"), at64.reason
    # the CUDA original is judged with 32-lane warps only: wavefronts are a HIP fact
    assert wavefront_devices("cuda") == []


def _hip(text: str) -> str:
    return device_code(get_dialect("hip").translate(text, str(SMOOTH / "include" / "k.cuh"), ()).text)


def test_the_hip_port_passes_and_planted_defects_are_rejected(smooth) -> None:
    rep = replay.build("box_smooth", smooth["box_smooth"])
    assert rep.spec is not None and len(rep.spec.sizes) == 1 and len(rep.spec.hidden_sizes) == 1
    assert rep.spec.args[0].role is Role.IN and rep.spec.args[1].role is Role.INOUT
    header = (SMOOTH / "include" / "smooth_kernels.cuh").read_text()
    include = (str(SMOOTH / "include"),)
    ported = _judge(Variant("box_smooth", "hip", _hip(header), "box_smooth", "translate"), rep, include)
    assert ported.status is Status.VALIDATED and "1 held back" in ported.reason, ported.reason
    assert "hidden-sizes(1)" in ported.checks
    # a port that hard-codes the size of the first run passes it and is caught on the held-back run
    fixed = header.replace("if (i >= n) return;", "if (i >= 4000) return;")
    assert fixed != header
    caught = _judge(Variant("box_smooth", "hip", _hip(fixed), "box_smooth", "user"), rep, include)
    assert caught.status is Status.FAILED and "hidden launch" in caught.reason, caught.reason
    # a port that writes its input
    writes = header.replace("const float* in", "float* in").replace(
        "if (i >= n) return;", "if (i >= n) return; in[i] = 0;"
    )
    assert writes != header
    mutated = _judge(Variant("box_smooth", "hip", _hip(writes), "box_smooth", "user"), rep, include)
    assert mutated.status is Status.FAILED and "inputs-unchanged" in mutated.reason, mutated.reason


def test_a_launch_written_with_a_host_templates_parameter_is_named_by_the_instance_it_ran() -> None:
    def launch(name: str, *args: capture.Arg) -> capture.Launch:
        return capture.Launch(name, 1, 1, (1, 1, 1), (32, 1, 1), 0, None, args, (), 0)

    n = capture.Arg(0, "int", "scalar", "int32", hex="10000000")
    a = capture.Arg(1, "double", "scalar", "float64", hex="0" * 16)
    x = capture.Arg(
        2, "const double*", "pointer", "float64", element="const double", element_bytes=8, const=True
    )
    params = ("int", "T", "const T*", "T", "T*")
    assert replay.instance_name(launch("axpby<T>", n, a, x), ("typename T",), params) == "axpby<double>"
    assert replay.instance_name(launch("axpby<float>", n, a, x), ("typename T",), params) == "axpby<float>"
    assert replay.instance_name(launch("axpby", n, a, x), ("typename T",), params) == "axpby"
    # a non-type parameter cannot be deduced from the arguments: the name stays as captured
    assert replay.instance_name(launch("tile<B>", n), ("int B",), ("int",)) == "tile<B>"
    assert replay.instance_name(launch("tile<256>", n), ("int B",), ("int",)) == "tile<256>"


def test_a_bool_array_is_replayed_as_bytes(tmp_path: Path) -> None:
    import json

    import numpy as np

    # a capture folder written by hand, as the format describes: one launch of set(bool* flags, int n)
    folder = tmp_path / "cap"
    (folder / "arrays").mkdir(parents=True)
    (folder / "launches").mkdir()
    before, after = np.zeros(64, dtype=np.uint8), (np.arange(64) % 3 == 0).astype(np.uint8)
    (folder / "arrays" / "k0-1-a0-before.bin").write_bytes(before.tobytes())
    (folder / "arrays" / "k0-1-a0-after.bin").write_bytes(after.tobytes())
    record = {
        "kernel": "set", "kernel_index": 0, "launch": 1, "sequence": 1, "grid": [1, 1, 1], "block": [64, 1, 1],
        "shared_bytes": 0, "stream": None,
        "args": [
            {"index": 0, "ctype": "bool*", "kind": "pointer", "element": "bool", "element_bytes": 1,
             "dtype": "bool", "const": False, "allocation": 0, "offset": 0},
            {"index": 1, "ctype": "int", "kind": "scalar", "dtype": "int32", "bytes": 4, "hex": "40000000"},
        ],
        "allocations": [{"index": 0, "bytes": 64, "before": "arrays/k0-1-a0-before.bin",
                         "after": "arrays/k0-1-a0-after.bin"}],
        "status": 0,
    }  # fmt: skip
    (folder / "launches" / "k0-s0.json").write_text(json.dumps(record))
    capture.finish(folder, "./prog", 1, 0)
    rep = replay.build("set", capture.load(folder).launches)
    assert rep.spec is not None and rep.spec.args[0].dtype == "uint8" and rep.spec.args[0].role is Role.INOUT
    source = (
        "__global__ void set(bool* flags, int n) { int i = threadIdx.x; if (i < n) flags[i] = i % 3 == 0; }\n"
    )
    assert _judge(Variant("set", "cuda", source, "set", "user"), rep).status is Status.VALIDATED
    wrong = source.replace("i % 3 == 0", "i % 2 == 0")
    assert _judge(Variant("set", "cuda", wrong, "set", "user"), rep).status is Status.FAILED
