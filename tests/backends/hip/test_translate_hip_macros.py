"""CUDA -> HIP where macros and conditionals live (#32 part 2): launches and API names in #define
bodies and at the macro's uses, every branch of #if/#ifdef/#elif/#else, namespaced and template
kernels in launches, and the arguments HIP 5.2 types differently (kernels as ``const void*``,
symbols through ``HIP_SYMBOL``).

The inputs are golden files of ours (tests/backends/hip/golden/{macro_launches, conditionals,
qualified_launches, function_symbols}.cu, checked text for text by test_translate_hip.py's golden
tests); here: the properties each must keep, and that every output compiles with hipcc in every
configuration its #if branches select.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from porter.backends.hip.translate import translate_to_hip

from porter.model import Severity

GOLDEN = Path(__file__).parent / "golden"
MINE = ("macro_launches", "conditionals", "qualified_launches", "function_symbols")
# the configurations conditionals.cu's branches select (-D flags); each must build for HIP
CONFIGS = {
    "default": [],
    "half": ["-DUSE_HALF"],
    "sync-copy": ["-DNO_ASYNC"],
    "events": ["-DUSE_EVENTS=1"],
    "graph": ["-DUSE_GRAPH=1"],
}


def _translate(name: str, launch: str = "chevrons"):
    path = GOLDEN / f"{name}.cu"
    return translate_to_hip(path.read_text(encoding="utf-8"), str(path), launch=launch)


def _code(text: str) -> str:
    """``text`` without comments and string literals."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("launch", ["chevrons", "ggl"])
@pytest.mark.parametrize("name", MINE)
def test_lines_are_kept_and_no_cuda_name_is_left(name: str, launch: str) -> None:
    source = (GOLDEN / f"{name}.cu").read_text(encoding="utf-8")
    tr = _translate(name, launch)
    # compiler lines stay the user's (an added runtime include says #line 1)
    assert tr.text.removeprefix("#include <hip/hip_runtime.h>\n#line 1\n").count("\n") == source.count("\n")
    left = re.findall(r"\b(?:cuda[A-Z_]\w*|CU[a-z_]\w*|__nv_\w+)\b", _code(tr.text))
    assert left == []


def test_ggl_rewrites_whole_launches_inside_define_bodies() -> None:
    text = _translate("macro_launches", "ggl").text
    assert "#define CUDA_LAUNCH(k, g, b, ...) hipLaunchKernelGGL(k, g, b, 0, 0, __VA_ARGS__)\n" in text
    assert "#define COMPLETE_LAUNCH hipLaunchKernelGGL(axpy, 1, n, 0, 0, a, x, y)\n" in text
    assert "hipLaunchKernelGGL(HIP_KERNEL_NAME(fill<T, 2>), 1, THREADS, 0, 0, p, n)" in text
    # over continued lines: the stream and shared bytes given, the backslashes kept
    assert "THREADS * sizeof(float), stream, __VA_ARGS__);              \\\n" in text


def test_ggl_rewrites_a_launch_the_use_completes_at_the_use() -> None:
    tr = _translate("macro_launches", "ggl")
    lines = tr.text.splitlines()
    assert (
        lines[60].strip()
        == "hipLaunchKernelGGL(scale, ((n) + THREADS - 1) / THREADS, THREADS, 0, 0, y, a, n);"
    )
    assert lines[61].strip() == "hipLaunchKernelGGL(scale, 1, THREADS, THREADS * sizeof(float), 0, x, a, n);"
    # the definitions keep their chevrons (hipcc accepts them), and say where the launch went
    assert "#define GRID_FOR(k, n) k<<<((n) + THREADS - 1) / THREADS, THREADS>>>" in tr.text
    infos = {(d.line, d.construct) for d in tr.diagnostics if d.severity == Severity.INFO}
    assert {(24, "<<<...>>>"), (26, "<<<...>>>"), (61, "GRID_FOR(...)"), (62, "KERNEL_ARGS3(...)")} <= infos


def test_chevrons_mode_leaves_macro_launches_as_written() -> None:
    source = (GOLDEN / "macro_launches.cu").read_text(encoding="utf-8")
    text = _translate("macro_launches").text
    assert "hipLaunchKernelGGL" not in text
    assert text.count("<<<") == source.count("<<<")


def test_a_use_whose_arguments_are_cuda_names_is_renamed_where_it_is_rewritten() -> None:
    src = (
        "#define ON(s) <<<1, 64, 0, s>>>\n"
        "__global__ void k(int* p) {}\n"
        "void f(int* p) { k ON(cudaStreamPerThread)(p); }\n"
    )
    text = translate_to_hip(src, "m.cu", launch="ggl").text
    assert "void f(int* p) { hipLaunchKernelGGL(k, 1, 64, 0, hipStreamPerThread, p); }" in text


def test_a_use_split_over_lines_keeps_its_line_breaks() -> None:
    src = (
        "#define CFG(n) <<<n, 32>>>\n"
        "__global__ void k(int* p) {}\n"
        "void f(int* p) {\n"
        "    k CFG(4)\n"
        "        (p);\n"
        "    k<<<1, 2>>>\n"
        "        (p);\n"
        "}\n"
    )
    text = translate_to_hip(src, "m.cu", launch="ggl").text.removeprefix(
        "#include <hip/hip_runtime.h>\n#line 1\n"
    )
    assert text.count("\n") == src.count("\n")
    assert "hipLaunchKernelGGL(k, 4, 32, 0, 0, \n        p);" in text
    assert "hipLaunchKernelGGL(k, 1, 2, 0, 0, \n        p);" in text


def test_a_macro_launch_built_by_token_pasting_is_kept_and_reported() -> None:
    src = "#define RUN(name) name##_kernel<<<1, 1>>>()\n"
    tr = translate_to_hip(src, "m.cu", launch="ggl")
    assert tr.text == src
    assert any("# or ##" in d.reason for d in tr.diagnostics)


def test_every_branch_of_a_conditional_is_translated() -> None:
    text = _translate("conditionals").text
    for include in ("<hip/hip_fp16.h>", "<hip/hip_bf16.h>", "<hip/hip_runtime.h>"):
        assert f"#include {include}" in text
    assert "#if defined(__HIPCC__)" in text
    # the #if 0 branch and both halves of the #ifndef
    assert "    hipDeviceReset();\n" in text
    assert "return hipMemcpy(d, h, n * sizeof(float), hipMemcpyHostToDevice) != hipSuccess;" in text
    ggl = _translate("conditionals", "ggl").text
    assert ggl.count("hipLaunchKernelGGL(square, n / 64, 64, 0, s, d, n);") == 3  # one per branch


def test_a_runtime_include_in_one_branch_does_not_stand_for_every_configuration() -> None:
    branch = (
        "#ifdef A\n#include <cuda_fp16.h>\n#else\n#include <cuda_runtime.h>\n#endif\n__global__ void k() {}\n"
    )
    assert translate_to_hip(branch, "b.cu").text.startswith("#include <hip/hip_runtime.h>\n#line 1\n")
    guarded = "#ifndef K_H\n#define K_H\n#include <cuda_runtime.h>\n__global__ void k() {}\n#endif\n"
    assert translate_to_hip(guarded, "k.cuh").text.startswith(
        "#ifndef K_H\n"
    )  # an include guard is not a branch


def test_namespaced_and_template_kernels_in_ggl_launches() -> None:
    text = _translate("qualified_launches", "ggl").text
    assert "hipLaunchKernelGGL(::test_0, 1, 1, 0, 0);" in text
    assert "hipLaunchKernelGGL(physics::step, 1, 64, 0, 0, p, 0.1f);" in text
    assert "hipLaunchKernelGGL(::physics::step, dim3(1, 1, 1), dim3(64), 0, 0, p, 0.2f);" in text
    assert "hipLaunchKernelGGL(HIP_KERNEL_NAME(kern<T, 4>), 1, 32, 0, s, p);" in text
    assert (
        "hipLaunchKernelGGL(HIP_KERNEL_NAME(physics::detail::clear<T, 2>), dim3(1), dim3(16), 0, s, p);"
        in text
    )


def test_kernels_become_const_void_pointers_and_symbols_go_through_hip_symbol() -> None:
    text = _translate("function_symbols").text
    assert (
        "hipFuncSetAttribute(reinterpret_cast<const void*>(blur), hipFuncAttributeMaxDynamicSharedMemorySize"
        in text
    )
    assert "hipFuncSetAttribute(reinterpret_cast<const void*>(zero<float>)," in text
    assert "hipFuncSetAttribute((const void*)blur," in text  # already HIP's form: left as written
    assert "hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(blur));" in text
    assert "hipFuncSetCacheConfig(reinterpret_cast<const void*>(blur), hipFuncCachePreferShared);" in text
    assert "#define SET_SMEM(k, bytes) hipFuncSetAttribute(reinterpret_cast<const void*>(k)," in text
    assert "hipMemcpyToSymbol(HIP_SYMBOL(coeffs), h, sizeof(h));" in text
    assert "hipMemcpyFromSymbolAsync(&count, HIP_SYMBOL(counter), sizeof(int)" in text
    assert "hipGetSymbolAddress((void**)&d_coeffs, HIP_SYMBOL(coeffs));" in text


def test_a_symbol_already_named_for_hip_is_not_wrapped_again() -> None:
    src = "__constant__ int c;\nvoid f(int* h) {\n    cudaMemcpyToSymbol(HIP_SYMBOL(c), h, 4);\n    cudaMemcpyToSymbol(&c, h, 4);\n}\n"
    text = translate_to_hip(src, "s.cu").text
    assert "hipMemcpyToSymbol(HIP_SYMBOL(c), h, 4);" in text
    assert "hipMemcpyToSymbol(&c, h, 4);" in text


# --------------------------------------------------------------------------- the outputs compile


def _hipcc() -> str:
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        pytest.skip("hipcc not installed")
    return hipcc


def _syntax_only(text: str, folder: Path, name: str, flags: list[str]) -> subprocess.CompletedProcess[str]:
    path = folder / f"{name}.hip"
    path.write_text(text, encoding="utf-8")
    cmd = [_hipcc(), "--offload-arch=gfx90a", "-fsyntax-only", "-x", "hip", *flags, str(path)]
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=folder)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("launch", ["chevrons", "ggl"])
@pytest.mark.parametrize("name", MINE)
def test_outputs_compile_with_hipcc(name: str, launch: str, tmp_path: Path) -> None:
    result = _syntax_only(_translate(name, launch).text, tmp_path, name, [])
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_configuration_of_the_conditionals_compiles_with_hipcc(config: str, tmp_path: Path) -> None:
    result = _syntax_only(_translate("conditionals", "ggl").text, tmp_path, "conditionals", CONFIGS[config])
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.integration
def test_the_bf16_configuration_needs_a_newer_hip(tmp_path: Path) -> None:
    if Path(shutil.which("hipcc") or "/").parent.parent.joinpath("include/hip/hip_bf16.h").exists():
        result = _syntax_only(_translate("conditionals").text, tmp_path, "conditionals", ["-DUSE_BF16"])
        assert result.returncode == 0, result.stderr[-3000:]
    else:
        pytest.skip("hip/hip_bf16.h (__hip_bfloat16) arrives in ROCm 5.7; this HIP is older")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("launch", ["chevrons", "ggl"])
@pytest.mark.parametrize("name", MINE)
def test_outputs_compile_through_porters_hip_on_cuda_headers(name: str, launch: str, tmp_path: Path) -> None:
    from porter.backends.hip.names import NAMES_HEADER, hip_names_header

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    (tmp_path / NAMES_HEADER).write_text(hip_names_header(), encoding="utf-8")
    source = tmp_path / f"{name}.cu"
    source.write_text(_translate(name, launch).text, encoding="utf-8")
    include = Path(__file__).resolve().parents[3] / "backends" / "hip" / "include"
    cmd = [
        nvcc,
        "-std=c++17",
        "-I",
        str(include),
        "-I",
        str(tmp_path),
        "-c",
        str(source),
        "-o",
        str(tmp_path / "out.o"),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
