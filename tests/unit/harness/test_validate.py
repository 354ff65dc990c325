"""Differential validation on real devices (PoCL's CPU OpenCL device here), Python references."""

from __future__ import annotations

import numpy as np
import pytest
from porter.backends import get_backend

from porter.harness.inputs import poisoned
from porter.harness.validate import (
    Reference,
    Tolerance,
    ValidateOptions,
    compare,
    tolerance_for,
    validate,
)
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant

OPTS = ValidateOptions(trials=2)


@pytest.fixture(scope="module")
def cl_device():
    devices = [d for d in get_backend("opencl").devices() if d.kind != "checker"]
    if not devices:
        pytest.skip("no OpenCL device (install pocl-opencl-icd and pyopencl)")
    return devices[0]


SAXPY_SPEC = KernelSpec(
    kernel="saxpy",
    args=(
        ArgSpec("x", "float32", Role.IN, ("n",)),
        ArgSpec("y", "float32", Role.INOUT, ("n",)),
        ArgSpec("a", "float32", Role.SCALAR, value="1.5f"),
        ArgSpec("n", "int32", Role.SCALAR, value="n"),
    ),
    grid=("(n + 63) / 64",),
    block=("64",),
    sizes=({"n": 1024}, {"n": 999}),
    hidden_sizes=({"n": 517},),
)


def saxpy_ref(x, y, a, n):
    y[:] = a * x + y


def _cl(source: str, name: str = "saxpy", **kw) -> Variant:
    return Variant(kernel=name, target="opencl", source=source, entry=name, provenance="user", **kw)


GOOD_SAXPY = """
__kernel void saxpy(__global const float* x, __global float* y, float a, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}"""


# ----------------------------------------------------------------------------- comparisons


def test_float_tolerance_is_relative_to_the_array_scale_and_ulp_aware():
    tol = tolerance_for("float32")
    exp = np.array([1000.0, 1e-3, 0.0], np.float32)
    assert compare(exp * np.float32(1 + 5e-6), exp, tol).ok
    assert compare(exp + np.float32(5e-3), exp, tol).ok  # 5e-3 <= 1e-5 * 1000 + ...
    bad = exp.copy()
    bad[1] = 1.0
    res = compare(bad, exp, tol)
    assert not res.ok and res.index == 1 and res.bad == 1 and res.max_abs == pytest.approx(0.999, rel=1e-3)
    one = np.array([1.0], np.float32)
    assert compare(np.nextafter(one, np.float32(2)), one, Tolerance(0.0, 0.0, 4)).ok  # 1 ULP
    assert not compare(one + np.float32(1e-3), one, Tolerance(0.0, 0.0, 4)).ok


def test_poison_nan_and_integers():
    tol = tolerance_for("float32")
    exp = np.array([1.0, np.nan, 2.0], np.float32)
    assert compare(exp.copy(), exp, tol).ok  # a NaN the reference computed is matched by NaN
    got = exp.copy()
    got[2] = poisoned("float32", 1)[0]
    assert not compare(got, exp, tol).ok
    ints = np.array([1, 2, 3], np.int32)
    assert compare(ints.copy(), ints, tolerance_for("int32")).ok
    assert not compare(ints + np.int32(1), ints, tolerance_for("int32")).ok


def test_per_dtype_and_atomics_tolerances():
    assert tolerance_for("float16").rtol == pytest.approx(1e-2)
    assert tolerance_for("float32").rtol == pytest.approx(1e-5)
    assert tolerance_for("float64").rtol < 1e-8
    assert tolerance_for("int32").rtol == 0.0
    atomics = KernelSpec("k", (), ("1",), ("1",), float_atomics=True)
    assert tolerance_for("float32", atomics).rtol > tolerance_for("float32").rtol
    assert tolerance_for("float32", KernelSpec("k", (), ("1",), ("1",), rtol=0.1)).rtol == 0.1


# ----------------------------------------------------------------------------- validate


@pytest.mark.integration
def test_correct_inout_kernel_is_validated(cl_device):
    (v,) = validate(_cl(GOOD_SAXPY), SAXPY_SPEC, Reference(python=saxpy_ref), [cl_device], OPTS)
    assert v.status is Status.VALIDATED, v.reason
    assert v.correct and v.compiled and v.executed
    assert v.trials == 6 and v.sizes == SAXPY_SPEC.sizes  # hidden sizes are tested, not listed
    assert {"guard", "inputs-unchanged", "deterministic", "matches-reference", "hidden-sizes(1)"} <= set(
        v.checks
    )
    assert v.max_abs_err is not None and v.max_abs_err <= 1e-5
    assert v.device == cl_device.label and v.toolchain


@pytest.mark.integration
def test_wrong_result_names_the_element_expected_and_got(cl_device):
    src = GOOD_SAXPY.replace("a * x[i] + y[i]", "a * x[i] + y[i] + (i == 700 ? 1.0f : 0.0f)")
    (v,) = validate(_cl(src), SAXPY_SPEC, Reference(python=saxpy_ref), [cl_device], OPTS)
    assert v.status is Status.FAILED and not v.correct
    assert v.reason.startswith("matches-reference: y[700]")
    assert "expected" in v.reason and "size n=1024" in v.reason


@pytest.mark.integration
def test_compile_errors_are_verdicts_with_the_log(cl_device):
    (v,) = validate(
        _cl(GOOD_SAXPY.replace("int i", "int i = ;")),
        SAXPY_SPEC,
        Reference(python=saxpy_ref),
        [cl_device],
        OPTS,
    )
    assert v.status is Status.FAILED and not v.compiled and not v.executed
    assert v.reason.startswith("compile:") and v.logs


@pytest.mark.integration
def test_a_hang_becomes_a_timeout_verdict(cl_device):
    src = GOOD_SAXPY.replace("if (i < n)", "while (x[0] < 2.0f) { y[0] += 1.0f; }\n    if (i < n)")
    (v,) = validate(
        _cl(src), SAXPY_SPEC, Reference(python=saxpy_ref), [cl_device], ValidateOptions(trials=1, timeout_s=5)
    )
    assert v.status is Status.FAILED and "timed out" in v.reason


@pytest.mark.integration
def test_near_constant_reference_output_is_inconclusive_not_a_pass(cl_device):
    spec = KernelSpec(
        kernel="fill",
        args=(
            ArgSpec("x", "float32", Role.IN, ("n",)),
            ArgSpec("out", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=("(n + 63) / 64",),
        block=("64",),
        sizes=({"n": 256},),
    )
    src = """__kernel void fill(__global const float* x, __global float* out, int n) {
        int i = get_global_id(0); if (i < n) out[i] = 0.0f * x[i]; }"""

    def ref(x, out, n):
        out[:] = 0.0

    (v,) = validate(
        _cl(src, "fill"), spec, Reference(python=ref), [cl_device], ValidateOptions(trials=1, redraws=1)
    )
    assert v.status is Status.FAILED and v.reason.startswith("near-constant: inconclusive")
    assert any("near-constant" in line for line in v.logs)


@pytest.mark.integration
def test_arg_map_and_local_buffer_extras(cl_device):
    """An OpenCL translation with an added __local argument (for CUDA's extern __shared__)."""
    spec = KernelSpec(
        kernel="block_sum",
        args=(
            ArgSpec("in", "float32", Role.IN, ("n",)),
            ArgSpec("partial", "float32", Role.OUT, ("(n + 127) / 128",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=("(n + 127) / 128",),
        block=("128",),
        shared_bytes="128 * 4",
        sizes=({"n": 1024}, {"n": 1001}),
    )
    src = """__kernel void block_sum(__global const float* in, int n, __global float* partial, __local float* s) {
        int t = get_local_id(0), i = get_global_id(0);
        s[t] = i < n ? in[i] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = get_local_size(0) / 2; k > 0; k >>= 1) {
            if (t < k) s[t] += s[t + k];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (t == 0) partial[get_group_id(0)] = s[0];
    }"""

    def ref(**kw):
        x = kw["in"]
        pad = np.zeros(-len(x) % 128, np.float32)
        return {
            "partial": np.concatenate([x, pad])
            .reshape(-1, 128)
            .sum(axis=1, dtype=np.float64)
            .astype(np.float32)
        }

    variant = _cl(
        src, "block_sum", arg_map=(0, 2, 1, None), extra_args=({"kind": "local", "bytes": "shared_bytes"},)
    )
    (v,) = validate(variant, spec, Reference(python=ref), [cl_device], OPTS)
    assert v.status is Status.VALIDATED, v.reason


@pytest.mark.integration
def test_a_broken_python_reference_is_reported(cl_device):
    def ref(x, y, a, n):
        raise RuntimeError("boom")

    (v,) = validate(_cl(GOOD_SAXPY), SAXPY_SPEC, Reference(python=ref), [cl_device], OPTS)
    assert v.status is Status.FAILED and "Python reference raised RuntimeError: boom" in v.reason


@pytest.mark.integration
def test_no_reference_available(cl_device):
    original = Variant("saxpy", "cuda", "__global__ void saxpy(){}", "saxpy", "original")
    (v,) = validate(_cl(GOOD_SAXPY), SAXPY_SPEC, Reference(original=original, devices=()), [cl_device], OPTS)
    assert v.status is not Status.VALIDATED and "no reference can run" in v.reason


@pytest.mark.integration
def test_a_checker_device_only_compiles_a_launch_too_large_to_simulate() -> None:
    """A program's own launch at its real size would take the simulator hours: over the limit, the
    checker device builds the variant and says why it did not run it; within it, it runs."""
    checkers = [d for d in get_backend("opencl").devices() if d.checks]
    if not checkers:
        pytest.skip("no checker device (install oclgrind)")
    variant = _cl(GOOD_SAXPY)
    small = ValidateOptions(trials=1, checker_max_work_items=512)
    (v,) = validate(variant, SAXPY_SPEC, Reference(python=saxpy_ref), checkers[:1], small)
    assert v.status is Status.COMPILED and v.device == checkers[0].label
    assert (
        "not simulated here: its smallest launch has 1024 work-items, over the 512 a checker simulates"
        in (v.reason)
    )
    (ran,) = validate(
        variant, SAXPY_SPEC, Reference(python=saxpy_ref), checkers[:1], ValidateOptions(trials=1)
    )
    assert ran.status is Status.VALIDATED
