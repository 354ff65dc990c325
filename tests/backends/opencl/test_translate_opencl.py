"""CUDA -> OpenCL C translation: golden rewrites, diagnostics, and real builds/runs on PoCL.

Golden files: ``golden/<case>.cu`` translates to ``golden/<case>.cl``.  After an intended change,
regenerate them with ``PORTER_UPDATE_GOLDEN=1 pytest tests/backends/opencl/test_translate_opencl.py`` and
review the diff.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from porter.backends.opencl.launch import instance_entry
from porter.backends.opencl.translate import launch_geometry, requirements, tables, translate_to_opencl

from porter.model import Severity, TranslatedKernel, Translation

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parent / "golden"
SAMPLES = ROOT / "samples" / "cuda"
CASES = sorted(p.stem for p in GOLDEN.glob("*.cu"))


def _translate_file(path: Path, **kw: Any) -> Translation:
    return translate_to_opencl(path.read_text(encoding="utf-8"), str(path), **kw)


def _kernel(tr: Translation, name: str) -> TranslatedKernel:
    found = [k for k in tr.kernels if k.name == name]
    assert found, f"no kernel {name} in {[k.name for k in tr.kernels]}"
    return found[0]


# --------------------------------------------------------------------------- golden rewrites


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    tr = _translate_file(GOLDEN / f"{case}.cu")
    expected = GOLDEN / f"{case}.cl"
    if os.environ.get("PORTER_UPDATE_GOLDEN") == "1":
        expected.write_text(tr.text, encoding="utf-8")
    assert expected.exists(), f"missing {expected}: run with PORTER_UPDATE_GOLDEN=1 and review it"
    assert tr.text == expected.read_text(encoding="utf-8")


def test_golden_cases_exist() -> None:
    assert {
        "atomics",
        "builtins_barriers",
        "constant",
        "helpers",
        "macros",
        "namespaces",
        "shared",
        "templates",
        "warp",
    } <= set(CASES)


def test_tables_are_data() -> None:
    t = tables()
    assert t["builtins"]["threadIdx"] == "get_local_id({d})"
    assert t["atomics"]["atomicAdd"]["int"] == "atomic_add"
    assert t["atomics"]["atomicAdd"]["float"].startswith("porter_")
    for name, helper in t["helpers"].items():
        assert "{space}" in helper["source"] and name in helper["source"]
    known = set(requirements())
    for name, spec in t["warp"].items():
        assert spec["requires"] and set(spec["requires"]) <= known, name
    for name, req in requirements().items():
        assert req["what"] and (req.get("extensions") or req.get("features") or req.get("core")), name
        assert set(req.get("needs", [])) <= known, name


def test_builtins_and_fences() -> None:
    tr = _translate_file(GOLDEN / "builtins_barriers.cu")
    assert "(uint)get_local_id(2)" in tr.text and "(uint)get_num_groups(1)" in tr.text
    assert "threadIdx" not in tr.text.replace("//", "")
    index3d, read_only = tr.text.split("__kernel void index3d")[1].split("__kernel void read_only_")
    assert "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)" in index3d
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in read_only
    assert "ulong n" in read_only  # size_t is not a legal kernel argument type
    assert _kernel(tr, "read_only").entry == "read_only_"


def test_shared_static_extern_and_aliases() -> None:
    tr = _translate_file(GOLDEN / "shared.cu")
    k = _kernel(tr, "two_extern")
    assert k.arg_map == (0, 1, None)
    assert k.extra_args == ({"kind": "local", "bytes": "shared_bytes", "symbol": "sdata"},)
    assert "__local float* sdata)" in tr.text
    assert "__local int* sidx = (__local int*)sdata;" in tr.text
    assert "__local float* half_ = sdata" in tr.text
    assert "__global const float* src = in +" in tr.text
    assert "__local int* bits = (__local int*)sdata;" in tr.text
    transpose = tr.text.split("__kernel void tile_transpose")[1].split("__kernel")[0]
    assert transpose.index("__local int flag;") < transpose.index("if (n > 0)")  # hoisted


def test_atomics_rewrites() -> None:
    tr = _translate_file(GOLDEN / "atomics.cu")
    assert "porter_atomic_add_f32_local(&block_sum, x[i])" in tr.text
    assert "porter_atomic_add_f32_global(fsum, block_sum)" in tr.text
    assert "porter_atomic_add_f64_global(dsum" in tr.text
    assert "atom_add(big, 1UL)" in tr.text
    assert "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable" in tr.text
    assert "atomic_cmpxchg(&counters[3], 0, i + 1)" in tr.text
    assert "static float porter_atomic_add_f32_local(volatile __local float* p, float v)" in tr.text


def test_templates_from_launch_sites() -> None:
    tr = _translate_file(GOLDEN / "templates.cu")
    names = [(k.name, k.entry) for k in tr.kernels]
    assert names == [
        ("scale<float, 2>", "scale_float_2"),
        ("scale<double, 2>", "scale_double_2"),
        ("scale<int, 4>", "scale_int_4"),
    ]
    assert "__kernel void scale_int_4(__global int* data, int factor, int n)" in tr.text
    assert "template <" not in tr.text
    assert any("never_launched" in d.construct for d in tr.diagnostics)


def test_templated_sample_instantiations() -> None:
    tr = _translate_file(SAMPLES / "templated.cu")
    assert [k.entry for k in tr.kernels] == ["axpby_float", "axpby_double", "block_sum_256", "block_sum_128"]
    assert _kernel(tr, "axpby<double>").arg_map == (0, 1, 2, 3, 4)
    assert "__local float s[256];" in tr.text


def test_constant_memory_becomes_arguments() -> None:
    tr = _translate_file(GOLDEN / "constant.cu")
    k = _kernel(tr, "fir")
    assert k.arg_map == (0, 1, 2, None, None)
    bias, weights = k.extra_args
    assert bias["symbol"] == "bias" and bias["count"] == "1" and bias["host_source"] == "&b"
    assert weights == {
        "kind": "constant",
        "symbol": "weights",
        "count": "5",
        "bytes": "5 * sizeof(float)",
        "dtype": "float32",
        "host_source": "h_w",
        "host_bytes": "TAPS * sizeof(float)",
        "host_line": 22,
    }
    assert "float weighted(__global const float* x, int i, __constant float* weights)" in tr.text
    assert "weighted(x, i, weights) + (*bias)" in tr.text


def test_macros_include_and_comments() -> None:
    tr = _translate_file(GOLDEN / "macros.cu")
    assert "#define GLOBAL_TID (((uint)get_group_id(0))" in tr.text
    assert "#define SYNC() barrier(" in tr.text
    assert "#define BIG 1UL << 40" in tr.text
    assert "static inline float norm2(float a, float b) { return sqrt(SQR(a) + SQR(b)); }" in tr.text
    assert "HOST_ONLY_CHECK" not in tr.text  # host macro of the header: not needed
    assert "// Every comment is kept." in tr.text and "/* macro with built-ins */" in tr.text
    assert "#include" not in tr.text and "#pragma once" not in tr.text


def test_include_dirs_are_searched(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.cuh").write_text("#define SCALE 3.0f\n", encoding="utf-8")
    src = '#include "scale.cuh"\n__global__ void k(float* p) { p[threadIdx.x] *= SCALE; }\n'
    without = translate_to_opencl(src, str(tmp_path / "k.cu"))
    assert any(d.severity == Severity.ERROR and "scale.cuh" in d.construct for d in without.diagnostics)
    found = translate_to_opencl(src, str(tmp_path / "k.cu"), include_dirs=[str(inc)])
    assert "#define SCALE 3.0f" in found.text
    assert not [d for d in found.diagnostics if d.severity == Severity.ERROR]


def test_a_kernel_after_a_c_header_guarded_for_cplusplus_is_translated(tmp_path: Path) -> None:
    """`#ifdef __cplusplus` / `extern "C" {` / `#endif` in an inlined C header (lavaMD's timer.h): the
    guard's lines are blanked, so the kernel of the .cu included after it is still seen (it was lost in
    the parser's ERROR node over the unbalanced brace)."""
    guard = (
        '#ifdef __cplusplus\nextern "C" {\n#endif\nlong long ticks(void);\n#ifdef __cplusplus\n}\n#endif\n'
    )
    (tmp_path / "clock.h").write_text(guard, encoding="utf-8")
    (tmp_path / "k.cu").write_text(
        "__global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n", encoding="utf-8"
    )
    src = '#include "clock.h"\n#include "k.cu"\nvoid host(float* d) { k<<<1, 32>>>(d); }\n'
    tr = translate_to_opencl(src, str(tmp_path / "wrapper.cu"))
    assert [k.name for k in tr.kernels] == ["k"]
    assert "__kernel void k(__global float* p)" in tr.text and 'extern "C"' not in tr.text
    assert not [d for d in tr.diagnostics if d.severity == Severity.ERROR]


def test_a_launch_in_an_explicitly_instantiated_host_template_is_translated_per_instance() -> None:
    src = (
        "template <class T> __global__ void twice(T* x) { x[threadIdx.x] *= 2; }\n"
        "template <class T> void run(T* d) { twice<T><<<1, 32>>>(d); }\n"
        "template void run<float>(float* d);\n"
        "template void run(int* d);\n"
    )
    tr = translate_to_opencl(src, "t.cu")
    assert [k.name for k in tr.kernels] == ["twice<float>", "twice<int>"]
    assert "__kernel void twice_float(__global float* x)" in tr.text and "twice_int" in tr.text


def test_helpers_get_address_space_variants() -> None:
    tr = _translate_file(GOLDEN / "helpers.cu")
    assert "float sum3(__global const float* p)" in tr.text
    assert "float sum3__local(__local const float* p)" in tr.text
    assert "sum3__local(&buf[t % 60])" in tr.text
    assert "static inline float clamp01(float v) { return clamp(v, 0.0f, 1.0f); }" in tr.text
    assert "(float4)(clamp01(c)" in tr.text
    assert "convert_int_rte(c)" in tr.text and "long big = 123L;" in tr.text and "0xFFul" in tr.text
    assert "uchar flip" in tr.text


SUBGROUPS = "(defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups))"
REQD_32 = "__attribute__((intel_reqd_sub_group_size(32)))"


def _kernel_text(tr: Translation, entry: str) -> tuple[str, str]:
    """(the #if line guarding kernel `entry` or "", the line before its __kernel)."""
    head = tr.text.split(f"__kernel void {entry}(")[0]
    last_if = head.rfind("#if ")
    guard = "" if last_if < 0 or "#endif" in head[last_if:] else head[last_if:].split("\n")[0]
    return guard, head.rstrip("\n").rsplit("\n", 1)[-1]


def test_warp_functions_need_subgroups() -> None:
    tr = _translate_file(GOLDEN / "warp.cu")
    assert "porter_shuffle_down(v, (uint)(offset))" in tr.text  # the [warp_helpers] entry, in the prelude
    assert "intel_sub_group_shuffle_down(v, v, d)" in tr.text
    assert "sub_group_shuffle_down((v), (d))" in tr.text
    assert "sub_group_ballot((v > 0.0f) != 0).x" in tr.text
    votes = _kernel(tr, "votes")
    assert not votes.untranslatable
    # A 32-bit ballot needs 32-wide sub-groups: required by attribute, compiled out without them.
    assert votes.requires == (
        "subgroups",
        "subgroup_shuffle",
        "subgroup_shuffle_relative",
        "subgroup_ballot",
        "reqd_sub_group_size_32",
    )
    guard, before = _kernel_text(tr, "votes")
    assert guard.startswith(f"#if {SUBGROUPS} && defined(cl_khr_subgroup_shuffle)")
    assert guard.endswith(
        "defined(cl_khr_subgroup_ballot) && defined(cl_intel_required_subgroup_size) && !defined(PORTER_NO_SUBGROUP_32)"
    )
    assert before == REQD_32
    # Generic in the warp size: the sub-group guard only, no required size.
    assert _kernel(tr, "generic_sum").requires == ("subgroups", "subgroup_shuffle_relative")
    guard, before = _kernel_text(tr, "generic_sum")
    assert guard == f"#if {SUBGROUPS} && defined(cl_khr_subgroup_shuffle_relative)" and before != REQD_32
    # A literal width of 32 is the whole warp once sub-groups are 32 wide.
    assert _kernel(tr, "width32").requires == ("subgroups", "subgroup_shuffle", "reqd_sub_group_size_32")
    assert _kernel_text(tr, "width32")[1] == REQD_32
    off = _translate_file(GOLDEN / "warp.cu", subgroups=False)
    k = _kernel(off, "votes")
    assert k.untranslatable and any("sub-groups" in u for u in k.untranslatable)
    assert "sub_group" not in off.text
    assert any(d.severity == Severity.ERROR and "sub-groups" in d.reason for d in off.diagnostics)


WARP_MACROS = """#define NWARPS (blockDim.x / warpSize)
#define LANE(i) ((i) % warpSize)
__global__ void k(int* p) { p[threadIdx.x] = NWARPS + LANE(threadIdx.x); }
__global__ void plain(int* p) { p[0] = 1; }
"""


def test_macros_reading_warp_size_make_their_users_need_subgroups() -> None:
    tr = translate_to_opencl(WARP_MACROS, "m.cu")
    assert _kernel(tr, "k").requires == ("subgroups",) and _kernel(tr, "plain").requires == ()
    assert _kernel_text(tr, "k")[0] == f"#if {SUBGROUPS}" and _kernel_text(tr, "plain")[0] == ""
    assert "#define LANE(i) ((i) % ((int)get_sub_group_size()))" in tr.text
    off = translate_to_opencl(WARP_MACROS, "m.cu", subgroups=False)
    assert any("NWARPS (uses warpSize)" in u for u in _kernel(off, "k").untranslatable)
    assert not _kernel(off, "plain").untranslatable


# --------------------------------------------------------------------------- diagnostics

_DIAGNOSTICS = [
    # (name, CUDA source, construct contains, reason contains, severity, kernel untranslatable)
    (
        "texture",
        "texture<float, 2, cudaReadModeElementType> t;\n__global__ void k(float* o) { o[0] = tex2D(t, 0.5f, 0.5f); }",
        "tex2D",
        "texture unit",
        Severity.ERROR,
        True,
    ),
    (
        "dynamic-parallelism",
        "__global__ void c(int* p) {}\n__global__ void k(int* p) { c<<<1, 1>>>(p); }",
        "<<<",
        "dynamic parallelism",
        Severity.ERROR,
        True,
    ),
    ("inline-asm", '__global__ void k(int* p) { asm("membar.gl;"); }', "asm", "PTX", Severity.ERROR, True),
    (
        "cooperative-groups",
        "__global__ void k(int* p) { cg::grid_group g = cg::this_grid(); }",
        "cg::",
        "cooperative groups",
        Severity.ERROR,
        True,
    ),
    (
        "subgroups-off",
        "__global__ void k(float* p) { p[0] = __shfl_xor_sync(0xffffffff, p[0], 1); }",
        "__shfl_xor_sync",
        "sub-groups",
        Severity.ERROR,
        True,
    ),
    (
        "dim3",
        "__global__ void k(int* p) { dim3 t = threadIdx; p[0] = t.x; }",
        "dim3",
        "dim3",
        Severity.ERROR,
        True,
    ),
    (
        "shared-in-helper",
        "__device__ float h() { __shared__ float s[4]; return s[0]; }\n"
        "__global__ void k(float* p) { p[0] = h(); }",
        "__shared__",
        "only in kernels",
        Severity.ERROR,
        True,
    ),
    (
        "device-variable",
        "__device__ int counter;\n__global__ void k(int* p) { p[0] = counter; }",
        "counter",
        "program-scope",
        Severity.ERROR,
        True,
    ),
    (
        "atomic-unknown-type",
        # a struct porter sees no definition of (struct fields it defines are atomics' targets)
        "struct S;\n__global__ void k(S* s) { atomicAdd(&s->c, 1); }",
        "atomicAdd",
        "type or memory",
        Severity.ERROR,
        True,
    ),
    (
        "shuffle-width",  # a constant width below 32 is translated: test_cooperative_groups.py
        "__global__ void k(float* p, int w) { p[0] = __shfl_down_sync(0xffffffff, p[0], 1, w); }",
        "width",
        "part of a warp",
        Severity.ERROR,
        True,
    ),
    (
        "lane-mask",  # over segments of 16 lanes (a whole warp's mask is kept: the masked forms)
        "__global__ void k(float* p) { p[0] = __shfl_down_sync(0x0000ffff, p[0], 1, 16); }",
        "mask",
        "lane mask ignored",
        Severity.WARNING,
        False,
    ),
    (
        "reference-param",  # an rvalue reference (T& is translated: test_kernel_coverage.py)
        "__device__ void h(float&& r) { r = 1.0f; }\n__global__ void k(float* p) { h(p[0] + 1.0f); }",
        "float&& r",
        "reference",
        Severity.ERROR,
        True,
    ),
    (
        "auto",  # an initializer porter cannot type (typed ones: test_kernel_coverage.py)
        "__global__ void k(float* p) { auto v = make_float2(p[0], p[1]); p[1] = v.x; }",
        "auto v",
        "cannot tell the type",
        Severity.ERROR,
        True,
    ),
    ("half", "__global__ void k(__half* p) { p[0] = p[1]; }", "__half", "half", Severity.ERROR, True),
    (
        "no-builtin",
        "__global__ void k(unsigned* p) { p[0] = __brev(p[1]); }",
        "__brev",
        "bit-reverse",
        Severity.ERROR,
        True,
    ),
    (
        "namespace",
        "namespace ns { __device__ int f() { return 1; } }\n__global__ void k(int* p) { p[0] = ns::f(); }",
        "namespace ns {",
        "no namespaces: its contents are translated at file scope",
        Severity.INFO,
        False,
    ),
    (
        "template-type-omitted",
        "template <class T> struct Pair { T a; T b; };\n__global__ void k(int* p) { p[0] = 1; }",
        "template <class T> struct Pair",
        "C++ template in device code: omitted",
        Severity.WARNING,
        False,
    ),
    (
        "unknown-pointer",
        "struct S { float* q; };\n__global__ void k(S s, float* o) { float* p = s.q; o[0] = p[0]; }",
        "float* p = s.q",
        "which memory",
        Severity.WARNING,
        False,
    ),
    (
        "cuda-arch",
        "#if __CUDA_ARCH__ >= 700\n#define FAST 1\n#endif\n__global__ void k(int* p) { p[0] = 1; }",
        "__CUDA_ARCH__",
        "undefined",
        Severity.WARNING,
        False,
    ),
    (
        "macro-body",
        "#define ADD(p, v) atomicAdd(p, v)\n__global__ void k(int* p) { p[0] = 1; }",
        "ADD",
        "macro body",
        Severity.WARNING,
        False,
    ),
    (
        "launch-bounds",
        "__global__ void __launch_bounds__(128) k(int* p) { p[0] = 1; }",
        "__launch_bounds__",
        "launch bounds",
        Severity.INFO,
        False,
    ),
    (
        "system-header",
        "#include <thrust/device_vector.h>\n__global__ void k(int* p) { p[0] = 1; }",
        "thrust",
        "system header",
        Severity.INFO,
        False,
    ),
    (
        "unsupported-header",
        "#include <cuda_fp16.h>\n__global__ void k(int* p) { p[0] = 1; }",
        "cuda_fp16.h",
        "half precision",
        Severity.WARNING,
        False,
    ),
    (
        "template-unlaunched",
        "template <typename T> __global__ void k(T* p) { p[0] = 0; }",
        "k",
        "no launch",
        Severity.WARNING,
        None,
    ),
    (
        "template-deduced",
        "template <typename T> __global__ void k(T* p) { p[0] = 0; }\n"
        "void host(float* d) { k<<<1, 1>>>(d); }",
        "k<...>",
        "deduction",
        Severity.WARNING,
        None,
    ),
    (
        "missing-include",
        '#include "nowhere.cuh"\n__global__ void k(int* p) { p[0] = 1; }',
        "nowhere.cuh",
        "not found",
        Severity.ERROR,
        False,
    ),
    (
        "reserved-name",
        "__global__ void k(int* p) { int global = 1; p[0] = global; }",
        "global",
        "reserved",
        Severity.INFO,
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "source", "construct", "reason", "severity", "untranslatable"),
    [pytest.param(*case, id=case[0]) for case in _DIAGNOSTICS],
)
def test_diagnostic(
    name: str, source: str, construct: str, reason: str, severity: Severity, untranslatable: bool | None
) -> None:
    tr = translate_to_opencl(source, "case.cu", subgroups=name != "subgroups-off")
    hits = [d for d in tr.diagnostics if construct in d.construct and reason in d.reason]
    assert hits, f"no diagnostic ({construct!r}, {reason!r}) in {tr.diagnostics}"
    assert hits[0].severity == severity
    assert hits[0].path == "case.cu" and hits[0].line >= 1
    if untranslatable is not None:
        k = next(k for k in tr.kernels if k.name == "k")
        assert bool(k.untranslatable) == untranslatable
        if untranslatable:
            assert "__kernel void k(" not in tr.text  # replaced by a comment
            assert "not translated" in tr.text


def test_diagnostic_lines_point_into_headers(tmp_path: Path) -> None:
    (tmp_path / "h.cuh").write_text("// header\n__device__ unsigned r(unsigned x) { return __brev(x); }\n")
    src = '#include "h.cuh"\n\n__global__ void k(unsigned* p) { p[0] = r(p[0]); }\n'
    tr = translate_to_opencl(src, str(tmp_path / "m.cu"))
    d = next(d for d in tr.diagnostics if d.construct == "__brev")
    assert d.path.endswith("h.cuh") and d.line == 2
    assert tr.kernels[0].untranslatable  # through the helper it calls


# --------------------------------------------------------------------------- launch mapping


def test_launch_geometry() -> None:
    assert launch_geometry(4, 256) == ((1024,), (256,))
    assert launch_geometry((49, 63), (16, 16)) == ((784, 1008), (16, 16))
    assert launch_geometry((2, 3, 4), (8,)) == ((16, 3, 4), (8, 1, 1))
    with pytest.raises(ValueError):
        launch_geometry((0,), (1,))
    with pytest.raises(ValueError):
        launch_geometry((1, 1, 1, 1), (1,))


def test_instance_entry_names() -> None:
    assert instance_entry("axpby", ["float"]) == "axpby_float"
    assert instance_entry("k", ["unsigned int", "-1"]) == "k_unsigned_int_m1"


# --------------------------------------------------------------------------- real builds and runs on PoCL


@pytest.fixture(scope="module")
def ocl_all() -> tuple[Any, list[Any]]:
    """The backend and every OpenCL device here (PoCL, Intel's CPU runtime, GPUs), checker aside."""
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        pytest.skip("pyopencl is not installed (pip install pyopencl)")
    from porter.backends.opencl import OpenCLBackend

    backend = OpenCLBackend()
    devices = [d for d in backend.devices() if d.kind != "checker"]
    if not devices:
        pytest.skip("no OpenCL device (install pocl-opencl-icd for a CPU device)")
    return backend, devices


@pytest.fixture(scope="module")
def ocl(ocl_all: tuple[Any, list[Any]]) -> tuple[Any, Any]:
    backend, devices = ocl_all
    return backend, devices[0]


def _device_meeting(ocl_all: tuple[Any, list[Any]], requires: tuple[str, ...]) -> tuple[Any, Any]:
    """(backend, the first device meeting `requires`), or a skip naming what every device lacks."""
    from porter.backends.opencl import missing_requirements

    backend, devices = ocl_all
    for device in devices:
        if not missing_requirements(device, requires):
            return backend, device
    lacks = "; ".join(f"{d.label} lacks {', '.join(missing_requirements(d, requires))}" for d in devices)
    pytest.skip(f"no OpenCL device meets {', '.join(requires)} ({lacks}); pip install intel-opencl-rt")


def _buildable(tr: Translation, device: Any) -> list[TranslatedKernel]:
    """The kernels `device` can build: translatable, and every requirement met."""
    from porter.backends.opencl import missing_requirements

    return [k for k in tr.kernels if not k.untranslatable and not missing_requirements(device, k.requires)]


def _compile(backend: Any, tr: Translation, k: TranslatedKernel, device: Any) -> Any:
    """Compile kernel `k` for `device` with the build options its requirements need there."""
    from porter.backends import CompileOptions
    from porter.backends.opencl import requirement_options

    options = CompileOptions(flags=requirement_options(device, k.requires))
    return backend.compile(tr.text, k.entry, options, device=device)


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.cu")))
@pytest.mark.parametrize("subgroups", [True, False])
@pytest.mark.integration
def test_sample_kernels_build(ocl_all: tuple[Any, list[Any]], sample: str, subgroups: bool) -> None:
    backend, devices = ocl_all
    tr = _translate_file(SAMPLES / sample, subgroups=subgroups)
    assert tr.kernels, sample
    for device in devices:
        for k in _buildable(tr, device):
            _compile(backend, tr, k, device)  # raises CompileError with the log


@pytest.mark.parametrize("case", CASES)
@pytest.mark.integration
def test_golden_programs_build(ocl_all: tuple[Any, list[Any]], case: str) -> None:
    backend, devices = ocl_all
    tr = _translate_file(GOLDEN / f"{case}.cu")
    for device in devices:
        for k in _buildable(tr, device):
            _compile(backend, tr, k, device)


@pytest.mark.integration
def test_warp_macro_program_builds_everywhere(ocl_all: tuple[Any, list[Any]]) -> None:
    backend, devices = ocl_all
    tr = translate_to_opencl(WARP_MACROS, "m.cu")
    for device in devices:
        assert "plain" in {k.entry for k in _buildable(tr, device)}
        for k in _buildable(tr, device):
            _compile(backend, tr, k, device)


@pytest.mark.integration
def test_kernels_needing_what_a_device_lacks_are_compiled_out(ocl_all: tuple[Any, list[Any]]) -> None:
    """Never a silently wrong kernel: where 32-wide sub-groups cannot be required, reduce_sum is
    not in the program at all (whatever the build options), so it cannot run with other widths."""
    from porter.backends import CompileError
    from porter.backends.opencl import missing_requirements

    backend, devices = ocl_all
    tr = _translate_file(SAMPLES / "reduce_shfl.cu")
    k = _kernel(tr, "reduce_sum")
    lacking = [d for d in devices if missing_requirements(d, k.requires)]
    if not lacking:
        pytest.skip("every OpenCL device here meets reduce_sum's requirements")
    for device in lacking:
        for flags in ((), ("-cl-std=CL3.0",)):
            from porter.backends import CompileOptions

            with pytest.raises(CompileError, match="not found"):
                backend.compile(tr.text, k.entry, CompileOptions(flags=flags), device=device)


def _run(
    ocl: tuple[Any, Any], tr: Translation, name: str, args: list[Any], grid: Any, block: Any
) -> list[Any]:
    """Run kernel `name` with CUDA-order `args` (+ the added ones); arrays come back from the device."""
    from porter.backends.isolate import LocalBuffer

    backend, device = ocl
    k = _kernel(tr, name)
    assert not k.untranslatable, k.untranslatable
    program = backend.load(_compile(backend, tr, k, device), device)
    extras = iter(k.extra_args)
    cl_args: list[Any] = []
    buffers: list[tuple[int, Any]] = []
    for slot in k.arg_map:
        value = args[slot] if slot is not None else next(extras)["value"]
        if isinstance(value, np.ndarray):
            buffers.append((len(cl_args), value))
            value = backend.to_device(value, device)
        elif isinstance(value, int) and slot is None:
            value = LocalBuffer(value)
        cl_args.append(value)
    global_size, local_size = launch_geometry(grid, block)
    assert all(g % b == 0 for g, b in zip(global_size, local_size, strict=True))
    program(*cl_args, grid=grid, block=block)
    backend.synchronize(device)
    return [backend.to_host(cl_args[i], host.dtype, host.shape) for i, host in buffers]


def _with_values(tr: Translation, name: str, values: list[Any]) -> Translation:
    """Attach the values of the added arguments (in extra_args order) for :func:`_run`."""
    kernels = []
    for k in tr.kernels:
        if k.name == name:
            extra = tuple({**e, "value": v} for e, v in zip(k.extra_args, values, strict=True))
            k = dataclasses.replace(k, extra_args=extra)
        kernels.append(k)
    return Translation(tr.source_path, tr.target, tr.text, tuple(kernels), tr.diagnostics)


@pytest.mark.integration
def test_run_vector_add(ocl: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(1)
    n = 1000
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    tr = _translate_file(SAMPLES / "vector_add.cu")
    _, _, c = _run(ocl, tr, "vector_add", [a, b, np.zeros(n, np.float32), np.int32(n)], (4,), (256,))
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.integration
def test_run_matmul_tiled(ocl: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(2)
    m, n, k = 70, 45, 33
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    tr = _translate_file(SAMPLES / "matmul_tiled.cu")
    grid = ((n + 15) // 16, (m + 15) // 16)
    out = _run(
        ocl,
        tr,
        "matmul_tiled",
        [a, b, np.zeros((m, n), np.float32), np.int32(m), np.int32(n), np.int32(k)],
        grid,
        (16, 16),
    )
    np.testing.assert_allclose(out[2], a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.integration
def test_run_histogram(ocl: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(3)
    n = 50_000
    data = rng.integers(0, 256, n, dtype=np.uint8)
    data[::7] &= 0x0F
    tr = _translate_file(SAMPLES / "histogram.cu")
    out = _run(ocl, tr, "histogram_shared", [data, np.zeros(256, np.uint32), np.int32(n)], (16,), (256,))
    np.testing.assert_array_equal(out[1], np.bincount(data, minlength=256).astype(np.uint32))


@pytest.mark.integration
def test_run_stencil2d(ocl: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(4)
    nx, ny = 37, 29
    grid_in = rng.standard_normal((ny, nx), dtype=np.float32)
    tr = _translate_file(SAMPLES / "stencil2d.cu")
    out = _run(
        ocl,
        tr,
        "jacobi_step",
        [grid_in, np.zeros_like(grid_in), np.int32(nx), np.int32(ny)],
        ((nx + 15) // 16, (ny + 15) // 16),
        (16, 16),
    )[1]
    ref = grid_in.copy()
    ref[1:-1, 1:-1] = np.float32(0.2) * (
        grid_in[1:-1, 1:-1] + grid_in[1:-1, :-2] + grid_in[1:-1, 2:] + grid_in[:-2, 1:-1] + grid_in[2:, 1:-1]
    )
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("name", "dtype"), [("axpby<float>", np.float32), ("axpby<double>", np.float64)])
@pytest.mark.integration
def test_run_templated_axpby(ocl: tuple[Any, Any], name: str, dtype: Any) -> None:
    rng = np.random.default_rng(5)
    n = 1000
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    a, b = dtype(2.0), dtype(-0.5)
    tr = _translate_file(SAMPLES / "templated.cu")
    out = _run(ocl, tr, name, [np.int32(n), a, x, b, y.copy()], (4,), (256,))[1]
    np.testing.assert_allclose(out, a * x + b * y, rtol=1e-6)


@pytest.mark.parametrize("block", [256, 128])
@pytest.mark.integration
def test_run_templated_block_sum(ocl: tuple[Any, Any], block: int) -> None:
    rng = np.random.default_rng(6)
    n = 3000
    data = rng.standard_normal(n, dtype=np.float32)
    grid = (n + block - 1) // block
    tr = _translate_file(SAMPLES / "templated.cu")
    out = _run(
        ocl, tr, f"block_sum<{block}>", [data, np.zeros(grid, np.float32), np.int32(n)], (grid,), (block,)
    )[1]
    padded = np.concatenate([data, np.zeros(grid * block - n, np.float32)]).reshape(grid, block)
    np.testing.assert_allclose(out, padded.sum(axis=1, dtype=np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.integration
def test_run_conv1d_constant(ocl: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(7)
    n = 1000
    x = rng.standard_normal(n, dtype=np.float32)
    taps = (5 - np.abs(np.arange(9) - 4)).astype(np.float32)
    taps /= taps.sum()
    tr = _translate_file(SAMPLES / "conv1d_constant.cu")
    k = _kernel(tr, "conv1d")
    assert k.extra_args[0]["count"] == "9" and k.extra_args[0]["host_source"] == "h_coeffs"
    tr = _with_values(tr, "conv1d", [taps])
    y = _run(ocl, tr, "conv1d", [x, np.zeros(n, np.float32), np.int32(n)], (8,), (128,))[1]
    ref = np.convolve(np.pad(x, 4), taps[::-1], mode="valid")
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.integration
def test_run_a_legacy_texture_kernel_and_saxpy_beside_it(ocl: tuple[Any, Any]) -> None:
    """scale_tex reads a texture reference over linear memory: its bound memory and element count are
    added arguments, and a fetch past the bound range reads zero."""
    tr = _translate_file(SAMPLES / "legacy_texture.cu")
    n, bound = 300, 250
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = _run(ocl, tr, "saxpy_plain", [np.int32(n), np.float32(0.5), x, y.copy()], (2,), (256,))[1]
    np.testing.assert_allclose(out, 0.5 * x + y)
    k = _kernel(tr, "scale_tex")
    assert [e["kind"] for e in k.extra_args] == ["texture", "texture_size"]
    values = (x[:bound].copy(), np.uint32(bound))
    bound_k = dataclasses.replace(
        k, extra_args=tuple({**e, "value": v} for e, v in zip(k.extra_args, values, strict=True))
    )
    tr = dataclasses.replace(tr, kernels=tuple(bound_k if t is k else t for t in tr.kernels))
    scaled = _run(ocl, tr, "scale_tex", [np.zeros(n, np.float32), np.float32(3.0), np.int32(n)], (2,), (256,))
    np.testing.assert_array_equal(scaled[0], np.where(np.arange(n) < bound, 3.0 * x, 0.0).astype(np.float32))


@pytest.mark.integration
def test_run_atomics(ocl: tuple[Any, Any]) -> None:
    n, block = 1000, 128
    grid = (n + block - 1) // block
    x = (np.arange(n) % 10).astype(np.float32) * 0.25
    counters = np.array([-1, 0, 0, 0], np.int32)
    ucounters = np.zeros(3, np.uint32)
    fsum = np.zeros(2, np.float32)
    dsum = np.zeros(1, np.float64)
    big = np.zeros(1, np.uint64)
    tr = _translate_file(GOLDEN / "atomics.cu")
    out = _run(ocl, tr, "atomics", [counters, ucounters, fsum, dsum, big, x, np.int32(n)], (grid,), (block,))
    counters_o, ucounters_o, fsum_o, dsum_o, big_o, _ = out
    assert counters_o[0] == n - 1 and counters_o[1] == -(n - 1) and counters_o[2] == -n
    assert 1 <= counters_o[3] <= n
    assert ucounters_o[0] == 0xFFFFFFFF and ucounters_o[2] == n
    assert ucounters_o[1] == n % 8  # atomicInc wraps at 7: n increments leave n mod 8
    assert fsum_o[0] == np.float32(x.sum())  # multiples of 0.25: exact in any order
    assert fsum_o[1] == np.float32(2.5)  # atomicExch after the sums on the same block's thread 0
    assert dsum_o[0] == pytest.approx(float(x.sum()), rel=1e-12)
    assert big_o[0] == n


@pytest.mark.integration
def test_run_extern_shared(ocl: tuple[Any, Any]) -> None:
    block, grid = 64, 3
    data = np.arange(block * grid, dtype=np.float32)
    tr = _translate_file(GOLDEN / "shared.cu")
    tr = _with_values(tr, "two_extern", [block * 4])
    out = _run(ocl, tr, "two_extern", [data, np.zeros_like(data)], (grid,), (block,))[1]
    # half[0] = sdata[block/2]; bits[0] = bit pattern of sdata[0]; sidx[1] = bit pattern of sdata[1]
    low_bit = (data[::block].view(np.int32) & 1).astype(np.float32)
    expect = (data[block // 2 :: block] + low_bit) + data[1::block].view(np.int32).astype(np.float32)
    np.testing.assert_array_equal(out, np.repeat(expect, block))


@pytest.mark.integration
def test_run_reduction_with_32_wide_subgroups(ocl_all: tuple[Any, list[Any]]) -> None:
    """reduce_shfl's warp-shuffle reduction (32-lane assumptions throughout) runs on a device that
    can require 32-wide sub-groups (Intel's CPU runtime: pip install intel-opencl-rt)."""
    tr = _translate_file(SAMPLES / "reduce_shfl.cu")
    requires = _kernel(tr, "reduce_sum").requires
    assert requires == ("subgroups", "subgroup_shuffle_relative", "reqd_sub_group_size_32")
    device_ocl = _device_meeting(ocl_all, requires)
    n, threads, blocks = 100_000, 512, 64
    data = ((np.arange(n) * 37) % 1000 / 1000.0 + 0.5).astype(np.float32)
    tr = _with_values(tr, "reduce_sum", [(threads // 32) * 4])
    out = _run(
        device_ocl, tr, "reduce_sum", [data, np.zeros(1, np.float32), np.int32(n)], (blocks,), (threads,)
    )[1]
    assert out[0] == pytest.approx(float(data.sum(dtype=np.float64)), rel=5e-4)


MASKED = """__global__ void masked(const int* x, int* down, int* idx, int* up, int* xr, int* full) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    unsigned m = 0x0000FFFFu;  // the first 16 lanes of each warp take part
    int v = x[i];
    down[i] = __shfl_down_sync(m, v, 4);
    idx[i] = __shfl_sync(m, v, (lane + 20) % 32);
    up[i] = __shfl_up_sync(m, v, 4);
    xr[i] = __shfl_xor_sync(m, v, 16);
    full[i] = __shfl_down_sync(0xffffffff, v, 4);
}
// the relative shuffles alone (Intel's CPU runtime computes its general shuffles wrongly: porter's probe)
__global__ void relative(const int* x, int* down, int* up, int* full) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned m = 0x0000FFFFu;
    int v = x[i];
    down[i] = __shfl_down_sync(m, v, 4);
    up[i] = __shfl_up_sync(m, v, 4);
    full[i] = __shfl_down_sync(0xffffffff, v, 4);
}
"""


def test_a_shuffle_with_a_partial_mask_reads_the_lanes_outside_it_through_porters_helpers() -> None:
    """A lane mask other than the full warp is kept: the masked forms read a lane outside it as CUDA's undefined
    lanes read on NVIDIA (0; the poison pattern when built with PORTER_POISON_UNDEFINED_LANES, a replay's second
    run), where before it was ignored and Intel's runtime returned what the lane held.  A full mask keeps the
    plain form, and each helper comes after those it calls."""
    tr = translate_to_opencl(MASKED, "masked.cu")
    assert "porter_shfl_down_sync((uint)(m), v, (uint)(4))" in tr.text
    assert "porter_shfl_sync((uint)(m), v, (uint)((lane + 20) % 32))" in tr.text
    assert "porter_shfl_up_sync((uint)(m), v, (uint)(4))" in tr.text
    assert "porter_shfl_xor_sync((uint)(m), v, (uint)(16))" in tr.text
    assert "full[i] = porter_shuffle_down(v, (uint)(4));" in tr.text
    assert not any("lane mask ignored" in d.reason for d in tr.diagnostics)
    order = [
        tr.text.index(f"{h}(")
        for h in ("porter_shuffle_down", "porter_undefined_lane", "porter_shfl_down_sync")
    ]
    assert order == sorted(order), order


@pytest.mark.integration
def test_run_masked_shuffles_read_lanes_outside_the_mask_as_nvidia_does(
    ocl_all: tuple[Any, list[Any]],
) -> None:
    tr = translate_to_opencl(MASKED, "masked.cu")
    device_ocl = _device_meeting(ocl_all, _kernel(tr, "relative").requires)
    n, block = 64, 32
    x = (np.arange(n, dtype=np.int32) * 7 + 3).astype(np.int32)
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    for poisoned, undefined in (
        (False, 0),
        (True, 2143346349),
    ):  # porter_emu.h's PORTER_UNDEFINED_LANE as int
        text = ("#define PORTER_POISON_UNDEFINED_LANES\n" if poisoned else "") + tr.text
        built = Translation(tr.source_path, tr.target, text, tr.kernels, tr.diagnostics)
        out = _run(
            device_ocl,
            built,
            "relative",
            [x, *(np.zeros(n, np.int32) for _ in range(3))],
            (n // block,),
            (block,),
        )
        down, up, full = out[1:]

        def read(src: np.ndarray, own: np.ndarray, undefined: int = undefined) -> np.ndarray:
            inside = (src < 16) & (src >= 0)
            return np.where(own, x, np.where(inside, x[base + np.clip(src, 0, 31)], undefined))

        np.testing.assert_array_equal(down, read(lane + 4, lane + 4 >= 32))
        np.testing.assert_array_equal(up, read(lane - 4, lane < 4))
        np.testing.assert_array_equal(full, np.where(lane + 4 < 32, x[base + np.minimum(lane + 4, 31)], x))


@pytest.mark.integration
def test_run_warp_votes_and_shuffles_with_32_wide_subgroups(ocl_all: tuple[Any, list[Any]]) -> None:
    """Every sub-group built-in the translation emits, against NumPy's idea of 32-lane warps."""
    tr = _translate_file(GOLDEN / "warp.cu")
    requires = _kernel(tr, "votes").requires
    device_ocl = _device_meeting(ocl_all, requires)
    n, block = 256, 64
    rng = np.random.default_rng(9)
    x = rng.standard_normal(n).astype(np.float32)
    x[32:64] = np.abs(x[32:64]) + 0.5  # one all-positive warp
    out = _run(
        device_ocl,
        tr,
        "votes",
        [x, np.zeros(n, np.uint32), np.zeros(n, np.int32), np.zeros(n, np.float32)],
        (n // block,),
        (block,),
    )
    ballots, flags, sums = out[1], out[2], out[3]
    warps = x.reshape(-1, 32)
    bits = ((warps > 0) * (1 << np.arange(32, dtype=np.uint64))).sum(axis=1).astype(np.uint32)
    np.testing.assert_array_equal(ballots, np.repeat(bits, 32))
    flags_ref = (warps > 0).all(axis=1) * 2 + (warps < 0).any(axis=1)
    np.testing.assert_array_equal(flags, np.repeat(flags_ref, 32).astype(np.int32))
    # warp_sum (shuffle-down tree) is exact in lane 0 only; first = lane 0's value; x = lane ^ 1.
    lane = np.arange(n) % 32
    first = np.repeat(warps[:, 0], 32)
    partner = x[np.arange(n) ^ 1]
    lane0 = lane == 0
    np.testing.assert_allclose(
        sums[lane0], warps.sum(axis=1, dtype=np.float64) + first[lane0] + partner[lane0], rtol=1e-5
    )
