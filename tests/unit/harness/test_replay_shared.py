"""porter.harness.replay: arguments that point into one allocation (two halves of one cudaMalloc, an
in-place stencil on ``a + 1`` and ``a``, an offset that is no multiple of any alignment) replayed as ONE
buffer with the captured offsets, on the CPU emulator and on OpenCL devices, and compared whole.

Each capture is written by hand (docs/CAPTURE_FORMAT.md), so what the program left is the test's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CompileOptions
from porter.backends.isolate import Alias

from porter import capture
from porter.harness import replay
from porter.harness.trial import ValidateOptions
from porter.model import Role, Status, Variant
from porter.plan import run_devices

pytestmark = pytest.mark.integration  # kernels run in children on the emulator and OpenCL CPU devices

FLOAT = {"ctype": "float*", "element": "float", "element_bytes": 4, "dtype": "float32"}


def _capture(folder: Path, kernel: str, grid: int, block: int, before: np.ndarray, after: np.ndarray,
             pointers: list[tuple[int, bool]], n: int, device: str = "") -> list[capture.Launch]:  # fmt: skip
    """One launch of `kernel` over one allocation (`before` -> `after`): `pointers` the kernel's pointer
    parameters in order, each (byte offset into the allocation, const), then an int `n`."""
    (folder / "arrays").mkdir(parents=True)
    (folder / "launches").mkdir()
    (folder / "arrays" / "a0-before.bin").write_bytes(before.tobytes())
    (folder / "arrays" / "a0-after.bin").write_bytes(after.tobytes())
    args: list[dict] = [
        {"index": i, "kind": "pointer", **FLOAT, "const": const, "allocation": 0, "offset": off}
        for i, (off, const) in enumerate(pointers)
    ]
    args[:] = [{**a, "ctype": "const float*"} if a["const"] else a for a in args]
    args.append({"index": len(args), "ctype": "int", "kind": "scalar", "dtype": "int32", "bytes": 4,
                 "hex": np.int32(n).tobytes().hex()})  # fmt: skip
    record = {
        "kernel": kernel, "kernel_index": 0, "launch": 1, "sequence": 1, "grid": [grid, 1, 1],
        "block": [block, 1, 1], "shared_bytes": 0, "stream": None, "args": args, "status": 0,
        "allocations": [{"index": 0, "bytes": before.nbytes, "before": "arrays/a0-before.bin",
                         "after": "arrays/a0-after.bin"}],
    }  # fmt: skip
    (folder / "launches" / "k0-s1.json").write_text(json.dumps(record))
    capture.finish(folder, "./prog", 1, 0, device=device)
    return capture.load(folder).launches


def _devices(dialect: str) -> list:
    found = [d for d in run_devices(dialect) if dialect != "cuda" or d.backend == "cpu"]
    if not found:
        pytest.skip(f"no device runs {dialect} here")
    return found


def _judge(target: str, source: str, entry: str, rep: replay.Replay, provenance: str = "user"):
    return replay.replay(
        Variant(entry, target, source, entry, provenance), rep, _devices(target), ValidateOptions()
    )


def _by_device(verdicts) -> dict[str, tuple[Status, str]]:
    return {v.device: (v.status, v.reason) for v in verdicts}


HALVES_CU = """__global__ void halves(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i] + 1.0f;
}
"""
HALVES_CL = """__kernel void halves(__global const float* in, __global float* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = 2.0f * in[i] + 1.0f;
}
"""


def _halves(tmp: Path, gap: int) -> replay.Replay:
    """``halves<<<>>>(buf, buf + n + gap, n)``: the input's half, `gap` floats left as they were, the
    output's half."""
    n = 256
    before = np.concatenate([np.linspace(-3, 3, n, dtype=np.float32), np.full(n + gap, 7.5, np.float32)])
    after = before.copy()
    after[n + gap :] = 2.0 * before[:n] + 1.0
    launches = _capture(tmp / "cap", "halves", 2, 128, before, after, [(0, True), ((n + gap) * 4, False)], n)
    return replay.build("halves", launches)


def test_two_halves_of_one_allocation_are_one_buffer_and_a_port_writing_the_wrong_half_fails(
    tmp_path: Path,
) -> None:
    rep = _halves(tmp_path, 0)
    assert rep.spec is not None, rep.problem
    holder, view, _ = rep.spec.args
    # the allocation is one array (512 floats, changed: compared whole); the output a pointer into it
    assert (holder.role, view.role, rep.instances[0].size["n0"]) == (Role.INOUT, Role.SCALAR, 512)
    assert rep.instances[0].values[1] == Alias(0, 1024)
    assert any("arg1 points 1024 bytes into arg0" in n for n in rep.spec.notes), rep.spec.notes
    good = _judge("cuda", HALVES_CU, "halves", rep, "original")
    assert all(v.status is Status.VALIDATED for v in good), _by_device(good)
    # a port that writes the input's half instead: the allocation differs where it should not
    wrong = HALVES_CU.replace("out[i] = ", "((float*)in)[i] = ")
    (bad,) = _judge("cuda", wrong, "halves", rep)
    assert bad.status is Status.FAILED and bad.reason.startswith("matches-reference"), bad.reason
    # OpenCL: 1024 bytes is a multiple of every device's base address alignment: a sub-buffer
    ok = _judge("opencl", HALVES_CL, "halves", rep)
    assert all(v.status is Status.VALIDATED for v in ok), _by_device(ok)
    wrong_cl = HALVES_CL.replace("out[i] = ", "((__global float*)in)[i] = ")
    assert all(v.status is Status.FAILED for v in _judge("opencl", wrong_cl, "halves", rep))


def test_an_offset_no_alignment_allows_is_replayed_at_that_offset(tmp_path: Path) -> None:
    rep = _halves(tmp_path, 3)  # the output starts 259 floats (1036 bytes) into the allocation
    assert rep.spec is not None and rep.instances[0].values[1] == Alias(0, 1036)
    good = _judge("cuda", HALVES_CU, "halves", rep, "original")
    assert all(v.status is Status.VALIDATED for v in good), _by_device(good)
    # one float early: the three floats between the halves are compared too
    early = HALVES_CU.replace("out[i] = ", "out[i - 1] = ").replace("if (i < n)", "if (i >= 1 && i <= n)")
    (bad,) = _judge("cuda", early, "halves", rep)
    assert bad.status is Status.FAILED, bad.reason
    # OpenCL: no sub-buffer starts there; shared virtual memory points there where the device has it
    verdicts = _judge("opencl", HALVES_CL, "halves", rep)
    on = _by_device(verdicts)
    assert any(status is Status.VALIDATED for status, _ in on.values()), on
    for status, reason in on.values():  # a device without SVM (Oclgrind) says why, not a wrong verdict
        assert status is Status.VALIDATED or (
            status is Status.COMPILED and "no shared virtual memory" in reason
        ), on
    wrong_cl = HALVES_CL.replace("out[i] = ", "((__global float*)in)[i] = ")
    on_bad = _by_device(_judge("opencl", wrong_cl, "halves", rep))
    assert all(s is not Status.VALIDATED for s, _ in on_bad.values()), on_bad
    assert any(s is Status.FAILED for s, _ in on_bad.values()), on_bad


PAIRS_CU = """__global__ void pairs(const float* right, float* left, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) left[2 * i] = 0.5f * (right[2 * i - 1] + right[2 * i]);
}
"""
PAIRS_CL = """__kernel void pairs(__global const float* right, __global float* left, int n) {
    int i = get_global_id(0);
    if (i < n) left[2 * i] = 0.5f * (right[2 * i - 1] + right[2 * i]);
}
"""


def test_an_in_place_stencil_on_a_plus_one_and_a_reads_through_one_buffer(tmp_path: Path) -> None:
    # pairs<<<>>>(a + 1, a, n): each even element the mean of itself (right[2i - 1]) and its right
    # neighbour; right[-1] is a[0], inside the allocation
    n = 200
    a = np.linspace(-1, 1, 2 * n + 1, dtype=np.float32)
    after = a.copy()
    after[0 : 2 * n : 2] = 0.5 * (a[0 : 2 * n : 2] + a[1 : 2 * n + 1 : 2])
    launches = _capture(tmp_path / "cap", "pairs", 2, 128, a, after, [(4, True), (0, False)], n)
    rep = replay.build("pairs", launches)
    assert rep.spec is not None, rep.problem
    right, left, _ = rep.spec.args
    # the lower pointer (a, the second argument) holds the allocation; a + 1 points 4 bytes into it
    assert (right.role, left.role) == (Role.SCALAR, Role.INOUT)
    assert rep.instances[0].values[0] == Alias(1, 4)
    good = _judge("cuda", PAIRS_CU, "pairs", rep, "original")
    assert all(v.status is Status.VALIDATED for v in good), _by_device(good)
    # a port that took the two arguments for distinct arrays (reading a copy) reads other values
    copy = PAIRS_CU.replace("right[2 * i - 1]", "left[2 * i]")
    assert _judge("cuda", copy, "pairs", rep)[0].status is Status.VALIDATED  # the same element: fine
    # one reading the element its neighbour writes races on the shared buffer (with a copy it would
    # read the old value every time, and the race would not show)
    shifted = PAIRS_CU.replace("right[2 * i - 1]", "right[2 * i + 1]")
    (bad,) = _judge("cuda", shifted, "pairs", rep)
    assert bad.status is Status.FAILED and bad.reason.startswith(("deterministic", "matches")), bad.reason
    scaled = PAIRS_CU.replace("0.5f *", "0.25f *")
    (bad,) = _judge("cuda", scaled, "pairs", rep)
    assert bad.status is Status.FAILED and bad.reason.startswith("matches-reference"), bad.reason
    on = _by_device(_judge("opencl", PAIRS_CL, "pairs", rep))
    assert any(status is Status.VALIDATED for status, _ in on.values()), on
    assert all(s in (Status.VALIDATED, Status.COMPILED) for s, _ in on.values()), on


def test_one_allocation_seen_as_floats_and_ints_is_left_out_with_why(tmp_path: Path) -> None:
    n = 64
    before = np.zeros(2 * n, np.float32)
    after = before.copy()
    after[:n] = 1.0
    launches = _capture(tmp_path / "cap", "mixed", 1, 64, before, after, [(0, False), (4 * n, False)], n)
    doc = json.loads((tmp_path / "cap" / "launches" / "k0-s1.json").read_text())
    doc["args"][1].update(ctype="int*", element="int", dtype="int32")
    (tmp_path / "cap" / "launches" / "k0-s1.json").write_text(json.dumps(doc))
    capture.finish(tmp_path / "cap", "./prog", 1, 0)
    launches = capture.load(tmp_path / "cap").launches
    rep = replay.build("mixed", launches)
    assert rep.spec is None and "point into one allocation as float32 and int32" in rep.problem, rep.problem


def test_a_launch_that_changed_nothing_is_poisoned_in_the_allocation_its_output_points_into(
    tmp_path: Path,
) -> None:
    # halves<<<>>>(buf, buf + n, n) where the output half already held the result: the output is a
    # pointer into arg0's buffer, so arg0 (the whole allocation) is what gets poisoned
    n = 256
    x = np.linspace(-3, 3, n, dtype=np.float32)
    both = np.concatenate([x, 2.0 * x + 1.0])
    launches = _capture(tmp_path / "cap", "halves", 2, 128, both, both, [(0, True), (n * 4, False)], n)
    devices = tuple(_devices("cuda"))
    original = replay.Original(
        Variant("halves", "cuda", HALVES_CU, "halves", "original"), CompileOptions(), devices
    )
    rep = replay.build("halves", launches, written={1}, original=original)
    assert rep.spec is not None, rep.problem
    (inst,) = rep.instances
    assert inst.label.endswith("(poisoned)") and rep.spec.args[0].role is Role.INOUT
    good = _judge("cuda", HALVES_CU, "halves", rep, "original")
    assert all(v.status is Status.VALIDATED for v in good), _by_device(good)
    idle = HALVES_CU.replace("out[i] = 2.0f * in[i] + 1.0f;", "(void)out;")
    assert _judge("cuda", idle, "halves", rep)[0].status is Status.FAILED
