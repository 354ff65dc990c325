"""CUDA -> HIP translation: golden files, tables, one test per diagnostic kind, and hipcc compiles.

Golden files live in tests/backends/hip/golden/: ``<name>.cu`` is the input, ``<name>.hip``
the expected output with the default ``<<<>>>`` launches, ``<name>.ggl.hip`` (when present) the
expected output with ``launch="ggl"``, and ``<name>.diags`` the expected diagnostics (one
``line:severity:construct`` per line, default launch style).  To regenerate after a deliberate
change, run with PORTER_REGEN_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from porter.backends.hip.translate import (
    hip_tables,
    local_includes,
    normalise_mask,
    translate_hip_file,
    translate_hip_files,
    translate_to_hip,
)

from porter.errors import UsageError
from porter.model import Severity, Translation
from porter.translate.common import c_tokens, split_call_args

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"
REGEN = os.environ.get("PORTER_REGEN_GOLDEN") == "1"
INPUTS = sorted(GOLDEN.glob("*.cu"))


def _diag_lines(tr: Translation) -> str:
    return "".join(f"{d.line}:{d.severity.value}:{d.construct}\n" for d in tr.diagnostics)


def _check(expected: Path, actual: str) -> None:
    if REGEN:
        expected.write_text(actual, encoding="utf-8")
    assert expected.exists(), f"missing golden file {expected.name} (run with PORTER_REGEN_GOLDEN=1)"
    assert actual == expected.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("src", INPUTS, ids=[p.stem for p in INPUTS])
def test_golden_chevrons(src: Path) -> None:
    tr = translate_to_hip(src.read_text(encoding="utf-8"), str(src))
    _check(src.with_suffix(".hip"), tr.text)
    _check(src.with_suffix(".diags"), _diag_lines(tr))


GGL = [p for p in INPUTS if p.with_suffix(".ggl.hip").exists() or (REGEN and "<<<" in p.read_text())]


@pytest.mark.parametrize("src", GGL, ids=[p.stem for p in GGL])
def test_golden_ggl(src: Path) -> None:
    tr = translate_to_hip(src.read_text(encoding="utf-8"), str(src), launch="ggl")
    _check(src.with_suffix(".ggl.hip"), tr.text)


def test_golden_set_covers_the_required_cases() -> None:
    names = {p.stem for p in INPUTS}
    assert {
        "headers",
        "api_renames",
        "macros",
        "templates",
        "launches",
        "strings_comments",
        "warp",
        "libraries",
    } <= names
    assert {"launches", "templates"} <= {p.stem for p in GGL}


# --------------------------------------------------------------------------- byte preservation


def test_only_code_identifiers_change() -> None:
    """Outside the renamed identifiers every byte is kept: comments, strings, spacing."""
    src = (GOLDEN / "strings_comments.cu").read_text()
    out = translate_to_hip(src, "s.cu").text
    assert out.count("cudaMalloc") == src.count("cudaMalloc")  # all in comments / strings
    assert 'R"(cudaDeviceSynchronize() in a raw string)"' in out
    assert "__shfl_down_sync(0xffffffff, v, 1). */" in out
    assert "    hipFree(d);\n" in out
    assert out.replace("hip/hip_runtime.h", "cuda_runtime.h").replace("hipFree(d);", "cudaFree(d);") == src


def test_untouched_file_is_identical() -> None:
    src = "// plain C++\n#include <vector>\nint add(int a, int b) { return a + b; }  /* cudaMalloc */\n"
    tr = translate_to_hip(src, "plain.cpp")
    assert tr.text == src
    assert tr.diagnostics == ()


def test_unicode_in_macro_body_keeps_offsets() -> None:
    src = "#include <cuda_runtime.h>\n#define M(x) /* α→β */ cudaFree(x); /* é */ cudaMalloc(&x, 4)\n"
    out = translate_to_hip(src, "u.cu").text
    assert out.endswith("#define M(x) /* α→β */ hipFree(x); /* é */ hipMalloc(&x, 4)\n")


# --------------------------------------------------------------------------- launches


def test_ggl_launch_forms() -> None:
    src = (
        "#include <cuda_runtime.h>\n"
        "__global__ void k(int* a) {}\n"
        "template <typename T, int N> __global__ void t(T* a) {}\n"
        "void f(int* a, float* b, cudaStream_t s) {\n"
        "  k<<<1, 2>>>(a);\n"
        "  k<<<1, 2, 16>>>(a);\n"
        "  t<float, 4><<<g(1), 2, 0, s>>>(b);\n"
        "  k<<<1, 2>>>();\n"
        "}\n"
    )
    out = translate_to_hip(src, "l.cu", launch="ggl").text
    assert "hipLaunchKernelGGL(k, 1, 2, 0, 0, a);" in out
    assert "hipLaunchKernelGGL(k, 1, 2, 16, 0, a);" in out
    assert "hipLaunchKernelGGL(HIP_KERNEL_NAME(t<float, 4>), g(1), 2, 0, s, b);" in out
    assert "hipLaunchKernelGGL(k, 1, 2, 0, 0);" in out
    assert "<<<" not in out
    assert translate_to_hip(src, "l.cu").text.count("<<<") == 4  # chevrons kept by default


def test_launch_style_is_validated() -> None:
    with pytest.raises(UsageError, match="launch style"):
        translate_to_hip("int x;", "x.cu", launch="triple")


def test_launch_in_macro_is_rewritten_in_ggl_mode_and_one_it_cannot_is_reported() -> None:
    src = "#define LAUNCH(k, a) k<<<1, 1>>>(a)\n__global__ void z(int* a) {}\nvoid f(int* a) { LAUNCH(z, a); }\n"
    tr = translate_to_hip(src, "m.cu", launch="ggl")
    assert "#define LAUNCH(k, a) hipLaunchKernelGGL(k, 1, 1, 0, 0, a)\n" in tr.text
    kept = translate_to_hip("#define L1(k) k<<<1>>>()\n", "m.cu", launch="ggl")
    assert any(
        d.construct == "<<<...>>>" and d.line == 1 and d.severity == Severity.INFO for d in kept.diagnostics
    )


# --------------------------------------------------------------------------- warp policy


@pytest.mark.parametrize(
    ("mask", "full"),
    [
        ("0xffffffff", True),
        ("0xFFFFFFFFu", True),
        ("(0xffffffffU)", True),
        ("~0u", True),
        ("-1", True),
        ("0xffffULL", False),
        ("mask", False),
        ("__activemask()", False),
    ],
)
def test_mask_policy(mask: str, full: bool) -> None:
    src = f"__device__ float f(float v, unsigned mask) {{ return __shfl_xor_sync({mask}, v, 1); }}\n"
    tr = translate_to_hip(src, "w.cu")
    assert "__shfl_xor(v, 1)" in tr.text
    diag = next(d for d in tr.diagnostics if d.construct.startswith("__shfl_xor_sync("))
    assert diag.severity == (Severity.INFO if full else Severity.WARNING)
    assert (normalise_mask(mask) in hip_tables().full_masks) == full


def test_width_32_is_kept_and_flagged() -> None:
    tr = translate_to_hip(
        "__device__ int f(int v) { return __shfl_up_sync(0xffffffff, v, 1, 32); }\n", "w.cu"
    )
    assert "__shfl_up(v, 1, 32)" in tr.text
    assert any("width 32" in d.construct and d.severity == Severity.WARNING for d in tr.diagnostics)


def test_warp_size_hazards_are_re_emitted() -> None:
    src = "__global__ void k(int* a) { int lane = threadIdx.x % 32; a[lane] = warpSize; }\n"
    tr = translate_to_hip(src, "w.cu")
    assert "warpSize" in tr.text
    hazards = [d for d in tr.diagnostics if d.construct == "warp-size-assumption"]
    assert hazards and hazards[0].line == 1


# --------------------------------------------------------------------------- diagnostics, one per kind


def _only(tr: Translation, construct: str):
    found = [d for d in tr.diagnostics if d.construct == construct]
    assert found, f"no diagnostic for {construct}: {[d.construct for d in tr.diagnostics]}"
    return found[0]


def _kernel(tr: Translation, name: str):
    return next(k for k in tr.kernels if k.name == name)


def test_unmapped_name_on_host_is_a_warning() -> None:
    tr = translate_to_hip("#include <cuda_runtime.h>\nvoid f() {\n  cudaFrobnicate(0);\n}\n", "u.cu")
    d = _only(tr, "cudaFrobnicate")
    assert (d.line, d.severity, d.path) == (3, Severity.WARNING, "u.cu")
    assert "cudaFrobnicate(0)" in tr.text


def test_unmapped_name_in_kernel_is_an_error_and_blocks_the_kernel() -> None:
    src = "__global__ void k(float* a) {\n  a[0] = cuMagicIntrinsic(a[1]);\n}\n__global__ void ok(float* a) { a[0] = 1; }\n"
    tr = translate_to_hip(src, "u.cu")
    assert _only(tr, "cuMagicIntrinsic").severity == Severity.ERROR
    assert _kernel(tr, "k").untranslatable == ("cuMagicIntrinsic",)
    assert _kernel(tr, "ok").untranslatable == ()
    assert (
        _kernel(tr, "k").entry == "k"
        and _kernel(tr, "k").arg_map == (0,)
        and _kernel(tr, "k").target == "hip"
    )


def test_user_defined_cuda_prefixed_names_are_not_reported(tmp_path: Path) -> None:
    (tmp_path / "util.cuh").write_text("#define CUDA_TRY(x) (x)\nint cudaHelperCount(void);\n")
    src = '#include "util.cuh"\n#define CUDA_LOCAL 1\nstatic int cudaMine(int a) { return a; }\n'
    src += "int g() { return CUDA_TRY(cudaMine(CUDA_LOCAL)) + cudaHelperCount() + cudaNotMine(); }\n"
    tr = translate_to_hip(src, str(tmp_path / "main.cu"))
    assert [d.construct for d in tr.diagnostics if d.construct.startswith(("cuda", "CUDA"))] == [
        "cudaNotMine"
    ]


def test_a_1d_texture_reference_becomes_a_pointer_and_a_size_with_lines_kept() -> None:
    src = (SAMPLES / "legacy_texture.cu").read_text()
    tr = translate_to_hip(src, str(SAMPLES / "legacy_texture.cu"))
    decl = _only(tr, "texture<float, 1, cudaReadModeElementType>")
    assert (decl.line, decl.severity) == (14, Severity.INFO)
    assert _only(tr, "cudaBindTexture").severity == Severity.INFO
    assert _kernel(tr, "scale_tex").untranslatable == ()
    assert _kernel(tr, "saxpy_plain").untranslatable == ()
    lines = tr.text.splitlines()
    at = lines.index("__device__ porter_texref<float> tex_in;")
    assert lines[at - 1] == "#line 14"  # the helpers sit on lines of their own; line numbers hold
    assert "out[i] = alpha * porter_tex1Dfetch(tex_in, i);" in tr.text
    assert "porter_bind_texture(" in tr.text and "porter_unbind_texture(tex_in)" in tr.text
    removed = _only(tr, "cudaThreadSynchronize")
    assert removed.severity == Severity.INFO and "hipDeviceSynchronize();" not in src
    assert "CUDA_CHECK(hipDeviceSynchronize());" in tr.text


def test_texture_references_a_plain_load_cannot_express_stay_errors_with_their_lines() -> None:
    src = (
        "texture<float, 2, cudaReadModeElementType> img;\n"
        "texture<unsigned char, 1, cudaReadModeNormalizedFloat> bytes;\n"
        "texture<float, 1, cudaReadModeElementType> ok;\n"
        "__global__ void k(float* o) { o[0] = tex2D(img, 0.5f, 0.5f) + tex1Dfetch(ok, 0); }\n"
        "void setup() { ok.filterMode = cudaFilterModeLinear; }\n"
    )
    tr = translate_to_hip(src, "t.cu")
    errors = {(d.line, d.construct) for d in tr.diagnostics if d.severity == Severity.ERROR}
    assert (1, "texture") in errors and (2, "texture") in errors  # 2-D; normalized-float reads
    assert (5, "ok.filterMode = cudaFilterModeLinear") in errors  # filtering
    two_d = next(d for d in tr.diagnostics if d.line == 1 and d.construct == "texture")
    assert "2-D texture reference" in two_d.reason
    assert "img" in _kernel(tr, "k").untranslatable  # the kernel reading it is not translated
    assert "__device__ porter_texref<float> ok;" in tr.text  # the 1-D one is still translated
    assert "texture<float, 2, cudaReadModeElementType> img;" in tr.text  # kept as written


def test_a_texture_objects_fetch_is_hips_own() -> None:
    src = "__global__ void k(cudaTextureObject_t t, float* o) { o[0] = tex1Dfetch<float>(t, 0); }\n"
    tr = translate_to_hip(src, "t.cu")
    assert "tex1Dfetch<float>(t, 0)" in tr.text and "porter_tex1Dfetch" not in tr.text


def test_opengl_headers_a_file_does_not_use_are_dropped_and_kept_when_it_does() -> None:
    unused = translate_to_hip("#include <GL/glut.h>\n__global__ void k(float* a) { a[0] = 1; }\n", "u.cu")
    assert "// porter: #include <GL/glut.h> dropped" in unused.text
    used = translate_to_hip("#include <GL/glut.h>\nvoid draw() { glutSwapBuffers(); }\n", "g.cu")
    assert "#include <GL/glut.h>" in used.text
    assert _only(used, "<GL/glut.h>").severity == Severity.INFO


def test_a_variable_named_texture_is_not_a_texture_reference() -> None:
    tr = translate_to_hip("float texture = 1.0f;\nfloat g() { return texture; }\n", "t.cu")
    assert tr.diagnostics == ()


def test_inline_asm_is_an_error_for_its_kernel() -> None:
    src = '__global__ void k(int* a) {\n  int l;\n  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));\n  a[l] = 0;\n}\n'
    tr = translate_to_hip(src, "a.cu")
    d = _only(tr, "inline-asm")
    assert (d.line, d.severity) == (3, Severity.ERROR)
    assert _kernel(tr, "k").untranslatable == ("inline-asm",)


def test_error_in_device_function_taints_calling_kernel() -> None:
    src = (
        '__device__ int lane() { int l; asm("mov.u32 %0, %%laneid;" : "=r"(l)); return l; }\n'
        "__global__ void uses(int* a) { a[lane()] = 1; }\n"
        "__global__ void clean(int* a) { a[0] = 1; }\n"
    )
    tr = translate_to_hip(src, "d.cu")
    assert _kernel(tr, "uses").untranslatable == ("lane: inline-asm",)
    assert _kernel(tr, "clean").untranslatable == ()


def test_dynamic_parallelism_is_an_error() -> None:
    src = "__global__ void child(int* a) {}\n__global__ void parent(int* a) {\n  child<<<1, 1>>>(a);\n}\n"
    tr = translate_to_hip(src, "dp.cu", launch="ggl")
    d = _only(tr, "dynamic-parallelism")
    assert (d.line, d.severity) == (3, Severity.ERROR)
    assert _kernel(tr, "parent").untranslatable == ("dynamic-parallelism",)


def test_cooperative_groups_translated_and_warned() -> None:
    src = (
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        "__global__ void k(int* a) { cooperative_groups::thread_block b = cooperative_groups::this_thread_block(); b.sync(); }\n"
    )
    tr = translate_to_hip(src, "cg.cu")
    assert "#include <hip/hip_cooperative_groups.h>" in tr.text
    assert "namespace cg = cooperative_groups;" in tr.text  # HIP keeps the namespace name
    assert _only(tr, "cooperative_groups::").line == 2
    assert _only(tr, "cooperative_groups::thread_block").severity == Severity.WARNING
    assert _kernel(tr, "k").untranslatable == ()


def test_libcudacxx_error_or_warning_per_construct() -> None:
    src = "#include <cuda/std/atomic>\n__global__ void k(int* a) {\n  cuda::std::atomic<int> x;\n  a[0] = cuda::std::min(a[0], 1);\n}\n"
    tr = translate_to_hip(src, "lc.cu")
    assert _only(tr, "cuda::std::atomic").severity == Severity.ERROR
    assert _only(tr, "cuda::std::min").severity == Severity.WARNING
    assert _only(tr, "<cuda/std/atomic>").severity == Severity.WARNING
    assert _kernel(tr, "k").untranslatable == ("cuda::std::atomic",)


def test_unified_memory_is_a_warning() -> None:
    tr = translate_to_hip("void f(float** p) { cudaMallocManaged(p, 64); }\n", "um.cu")
    assert "hipMallocManaged(p, 64)" in tr.text
    assert _only(tr, "cudaMallocManaged").severity == Severity.WARNING


def test_cuda_arch_checks() -> None:
    src = "#ifdef __CUDA_ARCH__\n#endif\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700\n#endif\n#define ON_DEVICE defined(__CUDA_ARCH__)\n"
    tr = translate_to_hip(src, "arch.cu")
    assert tr.text.startswith("#ifdef __HIP_DEVICE_COMPILE__\n")
    assert "#if defined(__HIP_DEVICE_COMPILE__) && __CUDA_ARCH__ >= 700" in tr.text
    assert "#define ON_DEVICE defined(__HIP_DEVICE_COMPILE__)" in tr.text
    severities = sorted((d.line, d.severity.value) for d in tr.diagnostics if d.construct == "__CUDA_ARCH__")
    assert severities == [(1, "info"), (3, "info"), (3, "warning"), (5, "info")]


ARCH_IN_CODE = """template <int N> struct Buf {
  enum {
#ifdef __CUDA_ARCH__
    BANKS = ((__CUDA_ARCH__ >= 200) ? 32 : 16),
#else
    BANKS = 16,
#endif
  };
};
#if __CUDA_ARCH__ >= 700
#define FAST 1
#endif
__global__ void k(int *x) { x[threadIdx.x] = Buf<1>::BANKS; }
"""


def test_cuda_arch_as_a_value_in_code_reads_a_macro_the_file_defines() -> None:
    # HIP-Clang defines no __CUDA_ARCH__: in code an undeclared name (rodinia's dwt2d did not compile for
    # AMD); as a directive's value it is 0.  Code now reads PORTER_CUDA_ARCH, 0 there too.
    tr = translate_to_hip(ARCH_IN_CODE, "arch.cu")
    head, body = tr.text.split("#line 1\n", 1)
    assert "#define PORTER_CUDA_ARCH __CUDA_ARCH__" in head and "#define PORTER_CUDA_ARCH 0" in head
    assert "BANKS = ((PORTER_CUDA_ARCH >= 200) ? 32 : 16)," in body
    assert "#ifdef __HIP_DEVICE_COMPILE__\n" in body and "#if __CUDA_ARCH__ >= 700\n" in body
    assert body.count("\n") == ARCH_IN_CODE.count("\n")  # line numbers kept
    arch = sorted((d.line, d.severity.value) for d in tr.diagnostics if d.construct == "__CUDA_ARCH__")
    assert arch == [(3, "info"), (4, "warning"), (10, "warning")]
    assert "PORTER_CUDA_ARCH" in next(d.reason for d in tr.diagnostics if d.line == 4)
    # a file that uses it only in directives gets no macro
    assert "PORTER_CUDA_ARCH" not in translate_to_hip("#if __CUDA_ARCH__ >= 700\n#endif\n", "d.cu").text


CASE_LABELS = """static const char *err_name(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidTextureBinding:
      return "cudaErrorInvalidTextureBinding";
    case cudaErrorMemoryAllocation:
    case cudaErrorTextureNotBound:
      return "memory or texture";
  }
  return "<unknown>";
}
__global__ void k(float *x) { x[threadIdx.x] = 1.0f; }
"""


def test_case_labels_of_cuda_values_hip_lacks_are_dropped() -> None:
    # helper_cuda.h of older CUDA samples names every CUDA error in a switch; HIP never returns one it has
    # no name for, and hipcc rejects the undeclared label (rodinia's hybridsort did not compile for AMD)
    tr = translate_to_hip(CASE_LABELS, "errors.cu")
    assert "    /* case cudaErrorInvalidTextureBinding: */\n" in tr.text
    assert "    case hipErrorOutOfMemory:\n    /* case cudaErrorTextureNotBound: */\n" in tr.text
    assert "    case hipSuccess:\n" in tr.text and 'return "cudaErrorInvalidTextureBinding";' in tr.text
    dropped = [d for d in tr.diagnostics if d.construct == "cudaErrorTextureNotBound"]
    assert len(dropped) == 1 and dropped[0].severity == Severity.INFO and dropped[0].line == 8
    assert "dropped" in dropped[0].reason and "// porter:" not in tr.text  # no "left as written" comment
    # a library's status porter's tables do not know (cuFFT's) may have a HIP name: left as written, said
    lib = translate_to_hip(
        "int f(cufftResult r) { switch (r) { case CUFFT_INVALID_TYPE: return 1; } return 0; }\n", "l.cu"
    )
    assert "{ case CUFFT_INVALID_TYPE: return 1; }" in lib.text


@pytest.mark.integration
@pytest.mark.parametrize(
    ("source", "before"),
    [
        (ARCH_IN_CODE, lambda t: t.replace("(PORTER_CUDA_ARCH >=", "(__CUDA_ARCH__ >=")),
        (CASE_LABELS, lambda t: re.sub(r"/\* (case \w+:) \*/", r"\1", t)),
    ],
    ids=["cuda-arch-in-code", "case-labels"],
)
def test_arch_values_and_dropped_case_labels_compile_with_hipcc(
    source: str, before: Callable[[str], str], tmp_path: Path
) -> None:
    hipcc = _hipcc()
    tr = translate_to_hip(source, "unit.cu")
    (tmp_path / "unit.hip").write_text(tr.text)
    result = _compile(hipcc, tmp_path, tmp_path / "unit.hip")
    assert result.returncode == 0, result.stderr[-3000:]
    # the translation as it was before: the CUDA names stayed, which hipcc rejects
    old = before(tr.text)
    assert old != tr.text
    (tmp_path / "old.hip").write_text(old)
    assert _compile(hipcc, tmp_path, tmp_path / "old.hip").returncode != 0


def test_token_pasting_is_reported() -> None:
    tr = translate_to_hip("#define API(n) cuda##n\n", "tp.cu")
    assert _only(tr, "cuda").severity == Severity.WARNING


def test_directed_rounding_math_is_reported() -> None:
    tr = translate_to_hip(
        "__device__ float f(float a) { return __fmul_rz(a, a) + __fmul_rn(a, a); }\n", "m.cu"
    )
    assert [d.construct for d in tr.diagnostics if d.construct.startswith("__")] == ["__fmul_rz"]


def test_missing_local_header_is_reported(tmp_path: Path) -> None:
    tr = translate_to_hip('#include "nowhere.cuh"\n', str(tmp_path / "x.cu"))
    assert _only(tr, '#include "nowhere.cuh"').severity == Severity.WARNING


def test_unknown_cuda_header_is_reported() -> None:
    tr = translate_to_hip("#include <cusolverDn.h>\n", "h.cu")
    assert _only(tr, "<cusolverDn.h>").severity == Severity.WARNING


def test_runtime_include_added_only_when_needed(tmp_path: Path) -> None:
    kernel = "__global__ void k(float* a) { a[0] = 1; }\n"
    tr = translate_to_hip(kernel, "k.cu")
    assert tr.text == "#include <hip/hip_runtime.h>\n#line 1\n" + kernel
    assert translate_to_hip("#include <cuda_runtime.h>\n" + kernel, "k.cu").text.count("hip_runtime.h") == 1
    (tmp_path / "c.cuh").write_text("#include <cuda_runtime.h>\n")
    assert "#line 1" not in translate_to_hip('#include "c.cuh"\n' + kernel, str(tmp_path / "k.cu")).text


def test_every_diagnostic_names_file_line_construct_reason() -> None:
    for sample in sorted(SAMPLES.glob("*.cu")):
        tr = translate_to_hip(sample.read_text(), str(sample))
        for d in tr.diagnostics:
            assert d.path == str(sample) and d.line >= 1 and d.construct and len(d.reason) > 20


# --------------------------------------------------------------------------- includes and files


def test_local_includes_and_file_set(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (tmp_path / "a.cuh").write_text('#include "b.cuh"\n#define CHECK(x) cudaGetLastError()\n')
    (inc / "b.cuh").write_text("#include <cuda_runtime.h>\ntypedef cudaStream_t stream_t;\n")
    main = tmp_path / "main.cu"
    main.write_text('#include "a.cuh"\n// #include "commented.cuh"\n#include "missing.cuh"\nint x;\n')
    assert local_includes(main.read_text(), str(main), [str(inc)]) == [tmp_path / "a.cuh"]
    assert local_includes((tmp_path / "a.cuh").read_text(), str(tmp_path / "a.cuh"), [str(inc)]) == [
        inc / "b.cuh"
    ]
    files = translate_hip_files(main, include_dirs=[str(inc)])
    assert list(files) == [main, tmp_path / "a.cuh", inc / "b.cuh"]
    assert "hipGetLastError()" in files[tmp_path / "a.cuh"].text
    assert "typedef hipStream_t stream_t;" in files[inc / "b.cuh"].text


def test_translate_file_errors_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        translate_hip_file(tmp_path / "absent.cu")
    bad = tmp_path / "bad.cu"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="binary file"):
        translate_hip_file(bad)


def test_tokenizer_skips_strings_and_comments() -> None:
    text = "f(a, \"x,y(\", '(') /* cudaFree( */ // cudaMalloc\n g(b)"
    kinds = [(t.kind, t.text) for t in c_tokens(text)]
    assert ("ident", "cudaFree") not in kinds and ("ident", "cudaMalloc") not in kinds
    tokens = [t for t in c_tokens(text) if t.kind != "comment"]
    args, close = split_call_args(tokens, 1)
    assert [[t.text for t in a] for a in args] == [["a"], ['"x,y("'], ["'('"]]
    assert tokens[close].text == ")"


# --------------------------------------------------------------------------- tables


def test_tables_load_and_have_the_required_entries() -> None:
    t = hip_tables()
    expected = {
        "cudaMalloc": "hipMalloc",
        "cudaMemcpyToSymbol": "hipMemcpyToSymbol",
        "cudaDeviceProp": "hipDeviceProp_t",
        "cudaErrorInvalidValue": "hipErrorInvalidValue",
        "cuLaunchKernel": "hipModuleLaunchKernel",
        "CUdeviceptr": "hipDeviceptr_t",
        "CUDA_SUCCESS": "hipSuccess",
        "cublasSgemm": "hipblasSgemm",
        "CUBLAS_OP_N": "HIPBLAS_OP_N",
        "curandState": "hiprandState",
        "curand_uniform": "hiprand_uniform",
        "cufftPlan1d": "hipfftPlan1d",
        "CUFFT_C2C": "HIPFFT_C2C",
        "cudaThreadSynchronize": "hipDeviceSynchronize",
    }
    assert {k: t.renames[k] for k in expected} == expected
    assert t.headers["curand_kernel.h"] == "hiprand/hiprand_kernel.h"
    assert t.headers["cublas_v2.h"] == "hipblas/hipblas.h"
    assert "__half" not in t.renames  # half types keep their names
    for name, target in t.renames.items():  # every rename target is itself unmapped-proof
        assert not t.unmapped.match(target), f"{name} -> {target} looks like CUDA"
    for name in [*t.notes, *t.unsupported]:
        assert name in t.renames or name in t.unsupported, name


def _hip_preprocessed(tmp_path: Path) -> str:
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        pytest.skip("hipcc not installed")
    src = tmp_path / "all.hip"
    src.write_text(
        "#include <hip/hip_runtime.h>\n#include <hip/hip_fp16.h>\n#include <hip/hip_complex.h>\n#include <hip/hiprtc.h>\n"
    )
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    out = subprocess.run(
        [hipcc, "--offload-arch=gfx90a", "-x", "hip", "-E", "-dD", str(src)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if out.returncode != 0:
        pytest.skip(f"hipcc -E failed here: {out.stderr[-300:]}")
    return out.stdout


def _hip_version() -> tuple[int, int]:
    for folder in ("/opt/rocm/include/hip", "/usr/include/hip"):
        header = Path(folder, "hip_version.h")
        if header.exists():
            text = header.read_text()
            major = re.search(r"#define HIP_VERSION_MAJOR (\d+)", text)
            minor = re.search(r"#define HIP_VERSION_MINOR (\d+)", text)
            if major and minor:
                return int(major.group(1)), int(minor.group(1))
    return (0, 0)


@pytest.mark.integration
def test_hip_names_exist_in_the_installed_hip_headers(tmp_path: Path) -> None:
    """Every runtime/driver/rtc/complex/half rename target and every math name is declared by HIP."""
    pre = _hip_preprocessed(tmp_path)
    words = set(re.findall(r"[A-Za-z_]\w*", pre))
    version = _hip_version()
    t = hip_tables()
    missing = []
    for group in (
        "runtime",
        "runtime_removed",
        "types",
        "constants",
        "errors",
        "driver",
        "rtc",
        "complex",
        "half",
    ):
        for name, target in t.groups[group].items():
            since = t.notes[name].since if name in t.notes else None
            if since and tuple(int(x) for x in since.split(".")) > version:
                continue
            if target not in words:
                missing.append(f"{name} -> {target}")
    missing += [f"math {m}" for m in t.math_same if m not in words]
    missing += [f"warp {r.legacy}" for r in t.warp.values() if r.legacy not in words]
    assert missing == []


# --------------------------------------------------------------------------- the output compiles


def _hipcc() -> str:
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        pytest.skip("hipcc not installed")
    return hipcc


def _compile(hipcc: str, folder: Path, file: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    cmd = [
        hipcc,
        "--offload-arch=gfx90a",
        "--cuda-device-only",
        "-c",
        "-x",
        "hip",
        str(file),
        "-o",
        str(folder / "out.o"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=folder)


def _write(files: dict[Path, Translation], folder: Path) -> Path:
    first = None
    for path, tr in files.items():
        target = folder / (path.stem + ".hip" if path.suffix == ".cu" else path.name)
        target.write_text(tr.text, encoding="utf-8")
        first = first or target
    assert first is not None
    return first


SAMPLE_FILES = sorted(SAMPLES.glob("*.cu"))


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLE_FILES, ids=[p.stem for p in SAMPLE_FILES])
@pytest.mark.integration
def test_translated_samples_compile_with_hipcc(sample: Path, tmp_path: Path) -> None:
    hipcc = _hipcc()
    files = translate_hip_files(sample)
    main = files[sample]
    errors = [d for d in main.diagnostics if d.severity == Severity.ERROR]
    result = _compile(hipcc, tmp_path, _write(files, tmp_path))
    if errors:  # untranslatable constructs are reported, and the kernels carrying them say so
        assert any(k.untranslatable for k in main.kernels)
        return
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["templated", "reduce_shfl"])
@pytest.mark.integration
def test_ggl_samples_compile_with_hipcc(name: str, tmp_path: Path) -> None:
    hipcc = _hipcc()
    files = translate_hip_files(SAMPLES / f"{name}.cu", launch="ggl")
    assert "hipLaunchKernelGGL(" in files[SAMPLES / f"{name}.cu"].text
    result = _compile(hipcc, tmp_path, _write(files, tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["warp", "macros", "templates", "launches"])
@pytest.mark.integration
def test_golden_outputs_compile_with_hipcc(name: str, tmp_path: Path) -> None:
    hipcc = _hipcc()
    for suffix in (".hip", ".ggl.hip"):
        golden = GOLDEN / f"{name}{suffix}"
        if golden.exists():
            copy = tmp_path / f"{name}{suffix}"
            copy.write_text(golden.read_text())
            result = _compile(hipcc, tmp_path, copy)
            assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.integration
def test_kernel_compiles_through_the_hip_backend(tmp_path: Path) -> None:
    from porter.backends import CompileOptions, ToolchainMissing
    from porter.backends.hip import HipBackend

    files = translate_hip_files(SAMPLES / "reduce_shfl.cu")
    _write(files, tmp_path)  # the translated common.cuh, found through include_dirs
    text = files[SAMPLES / "reduce_shfl.cu"].text
    try:
        binary = HipBackend().compile(
            text, "reduce_sum", CompileOptions(arch="gfx90a", include_dirs=(str(tmp_path),))
        )
    except ToolchainMissing as err:
        pytest.skip(str(err))
    assert binary.backend == "hip"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_the_texture_helpers_bind_fetch_in_range_and_unbind_in_both_api_forms(tmp_path: Path) -> None:
    from porter.backends.hip.texrefs import HELPERS

    shim = (
        "#include <stddef.h>\n#include <string.h>\ntypedef int hipError_t;\n"
        "template <class S> hipError_t hipMemcpyToSymbol(const S& s, const void* p, size_t n)"
        " { memcpy((void*)&s, p, n); return 0; }\n"
        "struct hipChannelFormatDesc { int x; };\n#define __device__\n#define __forceinline__ inline\n"
    )
    main = (
        "__device__ porter_texref<float> t;\n"
        "int main() {\n"
        "    float a[4] = {1, 2, 3, 4};\n"
        "    hipChannelFormatDesc d = {32};\n"
        "    t.channelDesc = d;\n"
        "    porter_bind_texture(0, t, a, d, sizeof a);\n"
        "    int r = (int)porter_tex1Dfetch(t, 3);\n"  # 4
        "    porter_bind_texture(NULL, &t, a, &d, 2 * sizeof(float));\n"  # the C form: 2 floats
        "    r = 10 * r + (int)porter_tex1Dfetch(t, 1) + (int)porter_tex1Dfetch(t, 2) + (int)porter_tex1Dfetch(t, -1);\n"
        "    porter_unbind_texture(&t);\n"
        "    return r + (int)porter_tex1Dfetch(t, 0);\n"  # 42: out of range and unbound read zero
        "}\n"
    )
    (tmp_path / "t.cpp").write_text(shim + HELPERS + main)
    subprocess.run(["g++", "-std=c++17", "t.cpp", "-o", "t"], cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "t")]).returncode == 42


def test_the_error_codes_helper_cuda_names_take_hips_names_and_build_on_the_cpu_runtime() -> None:
    from porter.backends.hip.names import hip_names_header

    src = (
        "#include <cuda_runtime.h>\n"
        "const char* name_of(cudaError_t e) {\n"
        "  switch (e) {\n"
        '    case cudaErrorMissingConfiguration: return "missing";\n'
        '    case cudaErrorPriorLaunchFailure: return "prior";\n'
        '    case cudaErrorMapBufferObjectFailed: return "map";\n'
        '    case cudaErrorNoKernelImageForDevice: return "image";\n'
        '    default: return "other";\n'
        "  }\n"
        "}\n"
    )
    tr = translate_to_hip(src, "errors.cu")
    for hip in (
        "hipErrorMissingConfiguration",
        "hipErrorPriorLaunchFailure",
        "hipErrorMapFailed",
        "hipErrorNoBinaryForGpu",
    ):
        assert f"case {hip}:" in tr.text
    assert not [d for d in tr.diagnostics if d.severity == Severity.WARNING and "cudaError" in d.construct]
    # the same names back to CUDA's, for a HIP program on porter's CPU runtime or HIP-on-CUDA
    header = hip_names_header()
    assert "#define hipErrorMissingConfiguration cudaErrorMissingConfiguration" in header
    assert "#define hipErrorNoBinaryForGpu cudaErrorNoKernelImageForDevice" in header
