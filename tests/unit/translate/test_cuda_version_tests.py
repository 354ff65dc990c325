"""CUDA version tests in the HIP and OpenCL translations (porter/translate/versions.py, the [version_tests]
tables of cuda2hip.toml and cuda2opencl.toml).

HIP and OpenCL C define no CUDA version macro, so an ``#if`` reads CUDART_VERSION as 0.  A test that gates a
newer CUDA (``>= 11000``) keeps that fallback path, the HIP translation's documented policy; a test every CUDA
porter ports from decides alike (``< 3000``, a fallback for CUDA 2 as in rodinia cfd) is decided as CUDA
decides it, so the port does not define its own ``double3`` beside the built-in one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from porter.backends.hip.translate import hip_tables, translate_to_hip
from porter.backends.opencl.translate import translate_to_opencl, version_rule
from porter.grammars import parse

from porter.model import Severity, Translation
from porter.translate.versions import VersionRule, decided_tests, fallback_uses

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "cuda" / "old_cuda_fallback.cu"
OLD_LINE = 7  # `#if CUDART_VERSION < 3000` in the fixture
MODERN_LINE = 14  # `#if CUDART_VERSION >= 11000`


def _source() -> str:
    return FIXTURE.read_text(encoding="utf-8")


def _rule() -> VersionRule:
    rule = hip_tables().versions
    assert rule is not None
    return rule


def _at(tr: Translation, line: int) -> list[tuple[Severity, str, str]]:
    return [(d.severity, d.construct, d.reason) for d in tr.diagnostics if d.line == line]


def test_both_targets_read_the_same_version_rule() -> None:
    hip, opencl = _rule(), version_rule()
    assert opencl is not None
    assert (hip.oldest, dict(hip.floors)) == (opencl.oldest, dict(opencl.floors))
    assert hip.floors == {"CUDART_VERSION": 8000, "__CUDACC_VER_MAJOR__": 8}


@pytest.mark.parametrize(
    ("condition", "value"),
    [
        ("CUDART_VERSION < 3000", False),
        ("CUDART_VERSION >= 3000", True),
        ("3000 > CUDART_VERSION", False),
        ("3000UL <= CUDART_VERSION", True),
        ("CUDART_VERSION < 8000", False),  # the oldest CUDA porter ports from is 8.0
        ("CUDART_VERSION <= 7990", False),
        ("CUDART_VERSION > 0x0BB8", True),
        ("CUDART_VERSION == 2030", False),
        ("CUDART_VERSION != 2030", True),
        ("__CUDACC_VER_MAJOR__ >= 8", True),
        ("__CUDACC_VER_MAJOR__ < 7", False),
        # a value that depends on the CUDA: the fallback policy
        ("CUDART_VERSION < 8010", None),
        ("CUDART_VERSION >= 11000", None),
        ("CUDART_VERSION == 8000", None),
        ("__CUDACC_VER_MAJOR__ >= 9", None),
        ("CUDART_VERSION >= OTHER_VERSION", None),
        ("CUDART_VERSION >= 3000.0", None),
    ],
)
def test_a_comparison_is_decided_only_when_every_supported_cuda_agrees(
    condition: str, value: bool | None
) -> None:
    src = f"#if {condition}\nint a;\n#endif\n".encode()
    tests = decided_tests(src, parse("cuda", src).root_node, _rule())
    assert [t.value for t in tests] == ([] if value is None else [value])
    if value is not None:
        assert tests[0].text == condition and src[tests[0].start : tests[0].end].decode() == condition


def test_only_conditions_are_decided_and_continued_lines_are_kept() -> None:
    src = (
        "#define OLD (CUDART_VERSION < 3000)\n"  # a macro body: left as written, as code is
        "// #if CUDART_VERSION < 3000\n"
        "#if defined(FAST) && \\\n    CUDART_VERSION \\\n    < 3000\nint a;\n"
        "#elif !(CUDART_VERSION >= 4000) || CUDART_VERSION >= 11000\nint b;\n#endif\n"
        "int f() { return CUDART_VERSION < 3000; }\n"
        "#ifdef CUDART_VERSION\nint c;\n#endif\n"
    )
    tr = translate_to_hip(src, "c.cu")
    lines = tr.text.splitlines()
    assert len(lines) == len(src.splitlines())  # no line moved
    assert lines[0] == "#define OLD (CUDART_VERSION < 3000)" and lines[1] == "// #if CUDART_VERSION < 3000"
    assert lines[2] == "#if defined(FAST) && \\"
    assert lines[3] == "    0 /* porter: CUDART_VERSION < 3000 is false from CUDA 8.0 on */ \\"
    assert lines[4] == ""  # the line the comparison ended on, still there
    assert lines[6] == (
        "#elif !(1 /* porter: CUDART_VERSION >= 4000 is true from CUDA 8.0 on */) || CUDART_VERSION >= 11000"
    )
    assert lines[9] == "int f() { return CUDART_VERSION < 3000; }"
    infos = sorted((d.line, d.construct) for d in tr.diagnostics if d.severity == Severity.INFO)
    assert infos == [(4, "CUDART_VERSION < 3000"), (7, "CUDART_VERSION >= 4000")]  # where each starts
    # the fallback uses OpenCL reports: the undecided test and the #ifdef, not the code or the macro body
    raw = src.encode()
    uses = fallback_uses(raw, parse("cuda", raw).root_node, _rule())
    assert [raw[:at].count(b"\n") + 1 for at, _ in uses] == [7, 11]


# --------------------------------------------------------------------------- the fixture, both targets


def test_hip_decides_the_old_cuda_fallback_and_keeps_the_modern_gates_fallback() -> None:
    src = _source()
    tr = translate_to_hip(src, FIXTURE.name)
    out, original = tr.text.splitlines(), src.splitlines()
    assert len(out) == len(original)  # line numbers stable
    assert out[OLD_LINE - 1] == "#if 0 /* porter: CUDART_VERSION < 3000 is false from CUDA 8.0 on */"
    assert out[MODERN_LINE - 1] == "#if CUDART_VERSION >= 11000"
    changed = [i + 1 for i, (a, b) in enumerate(zip(out, original, strict=True)) if a != b and i < 20]
    assert changed == [5, OLD_LINE]  # above the device code: the runtime include, the decided test
    _decided_and_fallback_said(tr)


def _decided_and_fallback_said(tr: Translation) -> None:
    """The translation's diagnostics: the old-CUDA test decided (info), the modern gate's fallback (warning)."""
    ((severity, construct, reason),) = _at(tr, OLD_LINE)
    assert (severity, construct) == (Severity.INFO, "CUDART_VERSION < 3000")
    assert "false for every CUDA from 8.0 on" in reason
    ((severity, construct, reason),) = _at(tr, MODERN_LINE)
    assert (severity, construct) == (Severity.WARNING, "CUDART_VERSION")
    assert "fallback path" in reason


def test_opencl_decides_the_old_cuda_fallback_and_keeps_the_modern_gates_fallback() -> None:
    tr = translate_to_opencl(_source(), FIXTURE.name)
    lines = tr.text.splitlines()
    at = lines.index("#if 0 /* porter: CUDART_VERSION < 3000 is false from CUDA 8.0 on */")
    assert lines[at + 1] == "struct double3"
    assert "#if CUDART_VERSION >= 11000" in lines and "#define WEIGHT 0.5" in lines
    ((kernel,),) = [[k for k in tr.kernels if k.name == "weighted_lengths"]]
    assert not kernel.untranslatable
    _decided_and_fallback_said(tr)


@pytest.mark.integration
def test_the_hip_port_compiles_with_hipcc(tmp_path: Path) -> None:
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        pytest.skip("hipcc not installed (ROCm's HIP SDK): the HIP port's build is not checked here")
    path = tmp_path / "old_cuda_fallback.hip"
    path.write_text(translate_to_hip(_source(), FIXTURE.name).text, encoding="utf-8")
    cmd = [hipcc, "--offload-arch=gfx90a", "-fsyntax-only", "-x", "hip", str(path)]
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.integration
def test_the_opencl_port_compiles_on_an_opencl_device() -> None:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        pytest.skip("pyopencl is not installed (pip install pyopencl)")
    from porter.backends import CompileOptions
    from porter.backends.opencl import OpenCLBackend, missing_requirements, requirement_options

    backend = OpenCLBackend()
    devices: list[Any] = [d for d in backend.devices() if d.kind != "checker"]
    if not devices:
        pytest.skip("no OpenCL device (install pocl-opencl-icd for a CPU device)")
    tr = translate_to_opencl(_source(), FIXTURE.name)
    (kernel,) = tr.kernels
    for device in devices:  # PoCL's CPU device where installed (double precision: cl_khr_fp64)
        if not missing_requirements(device, kernel.requires):
            options = CompileOptions(flags=requirement_options(device, kernel.requires))
            backend.compile(tr.text, kernel.entry, options, device=device)  # raises CompileError with the log
