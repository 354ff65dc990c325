"""porter.harness.replay: pointer arguments the program passed as null pointers (issue #29, "every
kernel judged").  Such a launch is replayed with a null pointer there -- on the CPU emulator and on
OpenCL devices, for the original and for every port -- and judged like any other; launches of one
kernel with the argument null in some and an array in others are judged apart, and each must pass.  A
kernel that dereferences the null pointer crashes, and its verdict names the argument.

Each capture is written by hand (docs/CAPTURE_FORMAT.md), so what the program left is the test's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from porter import capture
from porter.harness import replay
from porter.harness.trial import ValidateOptions
from porter.model import Role, Status, Variant
from porter.plan import run_devices

N = 200
IN = np.linspace(-5.0, 5.0, N, dtype=np.float32)

# out[i] = 2 in[i] + 1; counts[i] = the negatives among in[0..i], only when want_counts says so
COUNT_CU = """__global__ void scale_count(const float* in, float* out, int* counts, int want_counts, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = 2.0f * in[i] + 1.0f;
    if (want_counts) {
        int c = 0;
        for (int j = 0; j <= i; ++j) c += in[j] < 0.0f;
        counts[i] = c;
    }
}
"""
COUNT_CL = """__kernel void scale_count(__global const float* in, __global float* out, __global int* counts,
                          int want_counts, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    out[i] = 2.0f * in[i] + 1.0f;
    if (want_counts) {
        int c = 0;
        for (int j = 0; j <= i; ++j) c += in[j] < 0.0f;
        counts[i] = c;
    }
}
"""
# ports that store the counts whatever want_counts says: through the null pointer when it is one
ALWAYS_CU = COUNT_CU.replace("if (want_counts) {", "{")
ALWAYS_CL = COUNT_CL.replace("if (want_counts) {", "{")


def _pointer(
    index: int, element: str, dtype: str, const: bool, allocation: int | None, why: str = ""
) -> dict:
    a = {"index": index, "ctype": f"{'const ' if const else ''}{element}*", "kind": "pointer",
         "element": element, "element_bytes": 4, "dtype": dtype, "const": const, "allocation": allocation}  # fmt: skip
    if allocation is None:
        a["why"] = why
    else:
        a["offset"] = 0
    return a


def _int(index: int, value: int) -> dict:
    return {"index": index, "ctype": "int", "kind": "scalar", "dtype": "int32", "bytes": 4,
            "hex": np.int32(value).tobytes().hex()}  # fmt: skip


def _capture(folder: Path, counts: list[str | None]) -> list[capture.Launch]:
    """One launch of scale_count per element of `counts`: None passes NULL for the counts (and
    want_counts 0), "array" an array it fills (want_counts 1), anything else a counts pointer that is
    no device allocation with that `why`."""
    (folder / "arrays").mkdir(parents=True)
    (folder / "launches").mkdir()
    out = 2.0 * IN + 1.0
    want = np.cumsum(IN < 0).astype(np.int32)
    for k, what in enumerate(counts, 1):
        arrays = [(IN, IN), (np.zeros(N, np.float32), out)]
        if what == "array":
            arrays.append((np.zeros(N, np.int32), want))
        allocations = []
        for j, (before, after) in enumerate(arrays):
            for when, data in (("before", before), ("after", after)):
                (folder / "arrays" / f"l{k}a{j}-{when}.bin").write_bytes(data.tobytes())
            allocations.append({"index": j, "bytes": before.nbytes, "before": f"arrays/l{k}a{j}-before.bin",
                                "after": f"arrays/l{k}a{j}-after.bin"})  # fmt: skip
        if what == "array":
            third = _pointer(2, "int", "int32", False, 2)
        else:
            third = _pointer(2, "int", "int32", False, None, what or "null pointer")
        args = [_pointer(0, "float", "float32", True, 0), _pointer(1, "float", "float32", False, 1), third,
                _int(3, 1 if what == "array" else 0), _int(4, N)]  # fmt: skip
        record = {
            "kernel": "scale_count", "kernel_index": 0, "launch": k, "sequence": k, "grid": [4, 1, 1],
            "block": [64, 1, 1], "shared_bytes": 0, "stream": None, "args": args, "status": 0,
            "allocations": allocations,
        }  # fmt: skip
        (folder / "launches" / f"k0-s{k}.json").write_text(json.dumps(record))
    capture.finish(folder, "./prog", 1, 0)
    return capture.load(folder).launches


def test_a_null_pointer_argument_is_replayed_as_one_and_is_neither_input_nor_output(tmp_path: Path) -> None:
    rep = replay.build("scale_count", _capture(tmp_path / "cap", [None]))
    assert rep.spec is not None, rep.problem
    assert not rep.left_out and not rep.others
    counts = rep.spec.args[2]
    assert (counts.role, counts.shape) == (Role.SCALAR, ())  # no array: nothing to compare
    (inst,) = rep.instances
    assert inst.values[2] is None and inst.guarded[2] is None and "n2" not in inst.size
    assert len(rep.recorded[inst.label]) == 2  # in and out: the arrays compared
    assert any("arg2 (int*) is a null pointer" in n for n in rep.spec.notes), rep.spec.notes


def test_launches_with_the_argument_null_and_an_array_are_judged_apart(tmp_path: Path) -> None:
    rep = replay.build("scale_count", _capture(tmp_path / "cap", [None, "array", None]))
    assert rep.spec is not None, rep.problem
    # the first launch's set of null arguments is the replay's own, the other set its other
    assert [i.label for i in rep.instances] == ["launch 1 of run 1", "launch 3 of run 1"]
    (other,) = rep.others
    assert other.spec is not None and [i.label for i in other.instances] == ["launch 2 of run 1"]
    assert (rep.spec.args[2].role, other.spec.args[2].role) == (Role.SCALAR, Role.INOUT)
    assert isinstance(other.instances[0].values[2], np.ndarray)


def test_a_pointer_that_is_no_device_allocation_stays_not_replayable(tmp_path: Path) -> None:
    rep = replay.build("scale_count", _capture(tmp_path / "cap", ["not a device allocation"]))
    assert rep.spec is None
    assert rep.problem == "launch 1 (run 1): argument 2 (int*) is not a device allocation", rep.problem
    # beside a launch that is replayable: that one is judged, this one said in left_out
    mixed = replay.build("scale_count", _capture(tmp_path / "cap2", [None, "not a device allocation"]))
    assert mixed.spec is not None and not mixed.others
    assert mixed.left_out == ("launch 2 (run 1): argument 2 (int*) is not a device allocation",)


# --------------------------------------------------------------------------- run on the devices


def _devices(dialect: str) -> list:
    found = [d for d in run_devices(dialect) if dialect != "cuda" or d.backend == "cpu"]
    if not found:
        pytest.skip(f"no device runs {dialect} here")
    return found


def _judge(target: str, source: str, rep: replay.Replay, provenance: str = "user"):
    variant = Variant("scale_count", target, source, "scale_count", provenance)
    return replay.replay(variant, rep, _devices(target), ValidateOptions(timeout_s=60))


def _by_device(verdicts) -> dict[str, tuple[Status, str]]:
    return {v.device: (v.status, v.reason) for v in verdicts}


@pytest.mark.integration  # kernels run in children on the emulator and OpenCL CPU devices
def test_the_original_and_a_port_validate_on_null_and_array_launches(tmp_path: Path) -> None:
    rep = replay.build("scale_count", _capture(tmp_path / "cap", [None, "array"]))
    original = _judge("cuda", COUNT_CU, rep, "original")
    assert original and all(v.status is Status.VALIDATED for v in original), _by_device(original)
    assert all("with arg2 a null pointer" in v.reason for v in original), _by_device(original)
    port = _judge("opencl", COUNT_CL, rep)
    assert port and all(v.status is Status.VALIDATED for v in port), _by_device(port)
    # a port computing another `out`: a wrong answer, not a crash -- no null pointer is blamed
    (wrong,) = _judge("cuda", COUNT_CU.replace("2.0f * in[i]", "3.0f * in[i]"), rep)
    assert wrong.status is Status.FAILED and wrong.reason.startswith("matches-reference"), wrong.reason
    assert "null pointer" not in wrong.reason, wrong.reason


@pytest.mark.integration
def test_a_port_storing_through_the_null_pointer_fails_naming_it(tmp_path: Path) -> None:
    rep = replay.build("scale_count", _capture(tmp_path / "cap", [None, "array"]))
    for target, source in (("cuda", ALWAYS_CU), ("opencl", ALWAYS_CL)):
        verdicts = _judge(target, source, rep)
        on = _by_device(verdicts)
        assert verdicts and all(v.status is Status.FAILED for v in verdicts), on
        assert all("arg2" in v.reason and "null pointer" in v.reason for v in verdicts), on
    # the same port on the launches that pass an array only: it computes what the original left
    arrays = replay.build("scale_count", _capture(tmp_path / "arrays", ["array"]))
    assert all(v.status is Status.VALIDATED for v in _judge("cuda", ALWAYS_CU, arrays))


@pytest.mark.integration
def test_an_original_that_dereferences_the_null_pointer_is_a_failed_record_naming_it(tmp_path: Path) -> None:
    rep = replay.build("scale_count", _capture(tmp_path / "cap", [None]))
    (verdict,) = _judge("cuda", ALWAYS_CU, rep, "original")
    assert verdict.status is Status.FAILED, verdict.reason
    assert verdict.reason.startswith("run:") and "crashed" in verdict.reason, verdict.reason
    assert "arg2 was passed as a null pointer" in verdict.reason, verdict.reason
    assert "internal error" not in verdict.reason
