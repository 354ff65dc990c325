"""`__constant__` memory as kernel input: spec (inferred and from files), per-trial data, Job.symbols
in the child, validation on the CPU emulator, OpenCL's added __constant argument, GPUs (gpu-marked)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CompileOptions, get_backend
from porter.backends.isolate import Job, run_job

from porter.errors import UsageError
from porter.harness.inputs import make_args, make_constants
from porter.harness.spec import infer_spec, load_spec_file, spec_for, spec_snippet
from porter.harness.validate import Reference, ValidateOptions, validate
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant
from porter.scan import scan_file
from porter.scan.extract import device_code

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"
CONV = SAMPLES / "conv1d_constant.cu"
SMALL = {"sizes": ({"N": 2048}, {"N": 1001}), "hidden_sizes": ({"N": 777},)}
OPTS = ValidateOptions(trials=2)
INCLUDES = CompileOptions(include_dirs=(str(SAMPLES),))


def _conv_spec() -> KernelSpec:
    return replace(infer_spec(scan_file(str(CONV)), "conv1d"), **SMALL)  # type: ignore[arg-type]


def _original(text: str | None = None) -> Variant:
    text = CONV.read_text() if text is None else text
    return Variant(
        "conv1d", "cuda", device_code(text, kernels=["conv1d"]), "conv1d", "original", path=str(CONV)
    )


def _devices(backend: str) -> list:
    try:
        return [d for d in get_backend(backend).devices() if d.kind != "checker"]
    except Exception:  # noqa: BLE001
        return []


@pytest.fixture(scope="module")
def emulator():
    devices = _devices("cpu")
    if not devices:
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    return devices[0]


# ----------------------------------------------------------------------------- spec


def test_inferred_spec_has_the_constant_sized_from_its_define() -> None:
    spec = infer_spec(scan_file(str(CONV)), "conv1d")
    assert spec.constants == (ArgSpec("coeffs", "float32", Role.IN, ("9",)),)
    assert [a.name for a in spec.args] == ["x", "y", "n"]  # the symbol is not an argument
    assert any("coeffs" in n for n in spec.notes)


def test_a_kernel_without_constants_has_none() -> None:
    spec = infer_spec(scan_file(str(SAMPLES / "legacy_texture.cu")), "saxpy_plain")
    assert spec.constants == ()


def test_snippet_round_trips_through_a_spec_file(tmp_path: Path) -> None:
    spec = _conv_spec()
    text = spec_snippet(spec)
    assert "[[kernels.conv1d.constants]]" in text
    path = tmp_path / "conv1d_constant.cu.porter.toml"
    path.write_text(text)
    loaded = load_spec_file(path)["conv1d"]
    assert loaded.constants == spec.constants and loaded.source == "spec-file"


def test_spec_file_constants_and_their_errors(tmp_path: Path) -> None:
    base = """
[kernels.k]
grid = ["(n + 63) / 64"]
block = ["64"]
sizes = [{ n = 1000 }]
args = [{ name = "y", role = "out", dtype = "float", shape = ["n"] }]
"""
    path = tmp_path / "porter.toml"
    path.write_text(
        base + '[[kernels.k.constants]]\nname = "w"\ndtype = "int"\nshape = ["n / 10"]\nhigh = 3\n'
    )
    (w,) = load_spec_file(path)["k"].constants
    assert (w.name, w.dtype, w.role, w.shape, w.high) == ("w", "int32", Role.IN, ("n / 10",), 3.0)
    for bad, message in (
        ('[[kernels.k.constants]]\nname = "w"\ndtype = "float"\n', "missing `shape`"),
        ('[[kernels.k.constants]]\nname = "w[3]"\ndtype = "float"\nshape = ["3"]\n', "identifier"),
        ('[[kernels.k.constants]]\nname = "w"\ndtype = "quad"\nshape = ["3"]\n', "unknown dtype"),
        ('[[kernels.k.constants]]\nname = "w"\ndtype = "float"\nshape = ["m"]\n', "at size"),
    ):
        path.write_text(base + bad)
        with pytest.raises(UsageError, match=message.replace("[", r"\[")):
            load_spec_file(path)


def test_spec_file_without_constants_gets_them_inferred(tmp_path: Path) -> None:
    src = tmp_path / "conv1d_constant.cu"
    shutil.copy(CONV, src)
    shutil.copy(SAMPLES / "common.cuh", tmp_path / "common.cuh")
    no_constants = replace(_conv_spec(), constants=())
    (tmp_path / "conv1d_constant.cu.porter.toml").write_text(spec_snippet(no_constants))
    spec = spec_for(src, scan_file(str(src)), "conv1d")
    assert spec.source == "spec-file"
    assert [c.name for c in spec.constants] == ["coeffs"]


# ----------------------------------------------------------------------------- inputs


def test_constants_are_random_per_trial_and_leave_the_arguments_alone() -> None:
    spec = _conv_spec()
    size = spec.sizes[0]
    a, b = make_constants(spec, size, 1), make_constants(spec, size, 2)
    assert list(a) == ["coeffs"] and a["coeffs"].dtype == np.float32 and a["coeffs"].shape == (9,)
    assert np.array_equal(a["coeffs"], make_constants(spec, size, 1)["coeffs"])
    assert not np.array_equal(a["coeffs"], b["coeffs"])
    assert np.any(a["coeffs"] < 0) and np.any(a["coeffs"] > 0)
    plain = replace(spec, constants=())
    for x, y in zip(make_args(spec, size, 5), make_args(plain, size, 5), strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)


# ----------------------------------------------------------------------------- Job.symbols


TAPS = """
__constant__ float taps[3];
__global__ void conv3(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1) y[i] = taps[0] * x[i - 1] + taps[1] * x[i] + taps[2] * x[i + 1];
}
"""


@pytest.mark.integration
def test_job_symbols_are_set_in_the_child(emulator) -> None:
    n = 200
    x = np.random.default_rng(3).random(n, dtype=np.float32)
    taps = np.array([0.25, -0.5, 2.0], np.float32)
    job = Job(
        backend="cpu",
        source=TAPS,
        entry="conv3",
        device=emulator,
        args=(x, np.zeros(n, np.float32), np.int32(n)),
        grid=(1,),
        block=(256,),
        runs=2,
        read_back=(1,),
        symbols={"taps": taps},
    )
    res = run_job(job, 120)
    assert res.ok, res.error + res.log
    expected = 0.25 * x[:-2] - 0.5 * x[1:-1] + 2.0 * x[2:]
    for (y,) in res.outputs:
        np.testing.assert_allclose(y[1:-1], expected, rtol=1e-6)
    missing = run_job(replace(job, symbols={"nope": taps}), 120)
    assert not missing.ok and missing.stage == "load" and "nope" in missing.error


# ----------------------------------------------------------------------------- validate on the emulator


@pytest.mark.integration
def test_conv1d_validates_against_itself_on_the_emulator(emulator) -> None:
    ref = Reference(original=_original(), devices=(emulator,), options=INCLUDES)
    (v,) = validate(_original(), _conv_spec(), ref, [emulator], replace(OPTS, compile=INCLUDES))
    assert v.status is Status.VALIDATED, v.reason + "\n".join(v.logs)


@pytest.mark.integration
def test_wrong_coefficient_index_is_rejected(emulator) -> None:
    text = CONV.read_text()
    assert text.count("return coeffs[k] *") == 1
    bad = _original(text.replace("return coeffs[k] *", "return coeffs[KSIZE - 1 - k] *"))
    ref = Reference(original=_original(), devices=(emulator,), options=INCLUDES)
    # The program's own taps are symmetric, so only random coefficients expose the reversed index.
    (v,) = validate(bad, _conv_spec(), ref, [emulator], replace(OPTS, compile=INCLUDES))
    assert v.status is Status.FAILED and v.reason.startswith("matches-reference"), v.reason


@pytest.mark.integration
def test_python_reference_receives_the_constants(emulator) -> None:
    def conv(x, y, n, coeffs):
        k = coeffs.size
        padded = np.concatenate([np.zeros(k // 2), x.astype(np.float64), np.zeros(k // 2)])
        y[:] = np.convolve(padded, coeffs[::-1].astype(np.float64), mode="valid")[:n]

    (v,) = validate(
        _original(), _conv_spec(), Reference(python=conv), [emulator], replace(OPTS, compile=INCLUDES)
    )
    assert v.status is Status.VALIDATED, v.reason


# ----------------------------------------------------------------------------- OpenCL


def _opencl_variant(edit: tuple[str, str] | None = None) -> Variant:
    from porter.backends.opencl.translate import translate_to_opencl

    tr = translate_to_opencl(CONV.read_text(), str(CONV))
    (tk,) = tr.kernels
    assert tk.extra_args[0]["kind"] == "constant" and tk.extra_args[0]["symbol"] == "coeffs"
    text = tr.text if edit is None else tr.text.replace(*edit)
    return Variant(
        "conv1d",
        "opencl",
        text,
        tk.entry,
        "translate",
        arg_map=tk.arg_map,
        extra_args=tk.extra_args,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def pocl():
    devices = _devices("opencl")
    if not devices:
        pytest.skip("no OpenCL device (install pocl-opencl-icd and pyopencl)")
    return devices[0]


@pytest.mark.integration
def test_opencl_translation_validates_on_pocl_against_the_cuda_original(emulator, pocl) -> None:
    ref = Reference(original=_original(), devices=(emulator,), options=INCLUDES)
    (v,) = validate(_opencl_variant(), _conv_spec(), ref, [pocl], OPTS)
    assert v.status is Status.VALIDATED, v.reason + "\n".join(v.logs)


@pytest.mark.integration
def test_opencl_translation_with_a_wrong_coefficient_index_is_rejected(emulator, pocl) -> None:
    ref = Reference(original=_original(), devices=(emulator,), options=INCLUDES)
    variant = _opencl_variant(("return coeffs[k] *", "return coeffs[(k + 1) % KSIZE] *"))
    assert variant.source != _opencl_variant().source
    (v,) = validate(variant, _conv_spec(), ref, [pocl], OPTS)
    assert v.status is Status.FAILED and v.reason.startswith("matches-reference"), v.reason


@pytest.mark.integration
def test_opencl_constant_argument_without_a_spec_constant_is_refused(emulator, pocl) -> None:
    ref = Reference(original=_original(), devices=(emulator,), options=INCLUDES)
    spec = replace(_conv_spec(), constants=())
    (v,) = validate(_opencl_variant(), spec, ref, [pocl], OPTS)
    assert v.status is Status.FAILED and v.reason.startswith("arguments") and "coeffs" in v.reason


# ----------------------------------------------------------------------------- GPUs (run by the lead on an H200)


def _gpu(backend: str, platform: str | None = None):
    devices = [
        d for d in _devices(backend) if d.kind == "gpu" and (platform is None or d.platform == platform)
    ]
    if not devices:
        pytest.skip(f"no {backend} GPU device" + (f" ({platform})" if platform else ""))
    return devices[0]


@pytest.mark.gpu
def test_cuda_backend_set_symbol() -> None:
    be = get_backend("cuda")
    device = _gpu("cuda")
    program = be.load(be.compile(TAPS, "conv3", CompileOptions(), device), device)
    taps = np.array([1.0, 2.0, -3.0], np.float32)
    be.set_symbol(program, "taps", taps)  # type: ignore[attr-defined]
    n = 300
    x = np.random.default_rng(5).random(n, dtype=np.float32)
    y = be.to_device(np.zeros(n, np.float32), device)
    program(be.to_device(x, device), y, np.int32(n), grid=(2,), block=(256,))
    got = be.to_host(y, np.float32, (n,))
    # The taps cancel (1 + 2 - 3 = 0), so compare against float64 with an absolute bound scaled to
    # the operands' magnitude: a fused multiply-add on the GPU rounds differently from NumPy.
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got[1:-1], x64[:-2] + 2.0 * x64[1:-1] - 3.0 * x64[2:], rtol=1e-5, atol=1e-6)
    from porter.backends import LaunchError

    with pytest.raises(LaunchError):
        be.set_symbol(program, "no_such_symbol", taps)  # type: ignore[attr-defined]
    with pytest.raises(LaunchError):  # more bytes than the symbol holds
        be.set_symbol(program, "taps", np.zeros(64, np.float32))  # type: ignore[attr-defined]


@pytest.mark.gpu
def test_conv1d_validates_on_cuda_and_a_defect_is_rejected() -> None:
    device = _gpu("cuda")
    ref = Reference(original=_original(), devices=(device,), options=INCLUDES)
    opts = replace(OPTS, compile=INCLUDES, memcheck=False)
    (good,) = validate(_original(), _conv_spec(), ref, [device], opts)
    assert good.status is Status.VALIDATED, good.reason + "\n".join(good.logs)
    bad = _original(CONV.read_text().replace("return coeffs[k] *", "return coeffs[KSIZE - 1 - k] *"))
    (v,) = validate(bad, _conv_spec(), ref, [device], opts)
    assert v.status is Status.FAILED and v.reason.startswith("matches-reference"), v.reason


@pytest.mark.gpu
def test_conv1d_hip_translation_validates_on_hip_on_cuda() -> None:
    from porter.backends.hip.translate import translate_to_hip

    device = _gpu("hip", "hip-on-cuda")
    reference_device = _gpu("cuda")
    tr = translate_to_hip(CONV.read_text(), str(CONV))
    variant = Variant("conv1d", "hip", device_code(tr.text, kernels=["conv1d"]), "conv1d", "translate")
    ref = Reference(original=_original(), devices=(reference_device,), options=INCLUDES)
    (v,) = validate(variant, _conv_spec(), ref, [device], replace(OPTS, compile=INCLUDES))
    assert v.status is Status.VALIDATED, v.reason + "\n".join(v.logs)
