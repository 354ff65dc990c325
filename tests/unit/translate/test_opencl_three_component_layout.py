"""CUDA's three-component vectors in global memory are 12 (float3) or 24 (double3) bytes apart; OpenCL C's
are 16 and 32.  A kernel's ``float3* v`` translated as ``__global float3* v`` read and wrote every element but
the first at the wrong place (a ``bump(float3* v, int n)`` of our own failed 200 of 300 floats on PoCL, Intel's
runtime and Oclgrind), so it was refused; now the translation keeps CUDA's layout (backends/opencl/packed.py):
the pointer points to the scalar, whole elements go through vload3 / vstore3, members are scalars at 3*i+k,
and pointer arithmetic counts scalars.  What it cannot follow (an element's address, a reference to one, the
pointer stored or returned, an atomic on a member ...) is refused naming the construct and its line.  The runs
on OpenCL devices: tests/backends/opencl/test_opencl_packed_vectors.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from porter.backends.opencl.translate import translate_to_opencl

from porter.model import Severity, TranslatedKernel, Translation

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "programs" / "packed_vectors" / "main.cu"


def _translate(source: str) -> Translation:
    return translate_to_opencl(source, "k.cu")


def _kernel(tr: Translation, name: str) -> TranslatedKernel:
    (found,) = [k for k in tr.kernels if k.name == name]
    return found


def _flat(tr: Translation) -> str:
    return " ".join(tr.text.split())


def _errors(tr: Translation) -> list[tuple[int, str, str]]:
    return [(d.line, d.construct, d.reason) for d in tr.diagnostics if d.severity == Severity.ERROR]


def test_the_fixture_program_keeps_cudas_layout() -> None:
    tr = translate_to_opencl(FIXTURE.read_text(), str(FIXTURE))
    assert not _errors(tr) and all(not k.untranslatable for k in tr.kernels)
    text = _flat(tr)
    assert (
        "__kernel void bump(__global float* v, __global const float* w, porter_packed_float3 d_packed, int n)"
        in text
    )
    assert "float3 p = vload3(i, v);" in text  # a local copy of a whole element
    assert "vstore3(spun(p, w[3*i]), i, v);" in text  # a whole element written, a member read
    assert "v[3*i+1] = p.y * 2.0f + (w + 3*i)[2];" in text  # a member written; (w + i)->z
    assert "vstore3(vload3(i, v) + d, i, v);" in text  # v[i] += d
    # the helper taking the pointer: its variant for global memory keeps the layout too
    assert (
        "void settle(__global float* p, int i, float lowest) { if (p[3*i+2] < lowest) p[3*i+2] = lowest; }"
        in text
    )
    # int3 through a local pointer, -> and *
    assert "__kernel void combine(__global const int* cells, __global int* totals, int n)" in text
    assert "__global const int* c = cells + 3*i;" in text
    assert "vstore3((int3)(c[0] + c[1], c[1] * c[2], c[0] - 1), i, totals);" in text
    assert "float3*" not in tr.text and "int3*" not in tr.text


def test_a_by_value_three_component_argument_is_passed_in_cudas_layout() -> None:
    """The host passes a float3 argument's 12 bytes; OpenCL C's float3 argument takes 16 (Intel's runtime and
    Oclgrind refuse 12): the argument is a struct of three floats and the kernel's first line the float3."""
    tr = translate_to_opencl(FIXTURE.read_text(), str(FIXTURE))
    text = _flat(tr)
    assert "typedef struct { float x, y, z; } porter_packed_float3;" in text
    assert "{ float3 d = (float3)(d_packed.x, d_packed.y, d_packed.z); int i =" in text
    assert _kernel(tr, "bump").arg_map == (0, 1, 2, 3)
    source = "__global__ void k(const double3 d, double* out) { out[0] = d.y; }\n"
    tr = _translate(source)
    text = _flat(tr)
    assert "typedef struct { double x, y, z; } porter_packed_double3;" in text
    assert (
        "k(const porter_packed_double3 d_packed, __global double* out) { const double3 d = (double3)(" in text
    )
    assert "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" in tr.text


@pytest.mark.parametrize(
    ("vec", "scalar"),
    [
        ("float3", "float"),
        ("const double3", "const double"),
        ("int3", "int"),
        ("uchar3", "uchar"),
        ("longlong3", "long"),
    ],
)
def test_each_three_component_type_becomes_a_pointer_to_its_scalar(vec: str, scalar: str) -> None:
    source = f"__global__ void bump({vec}* v, float* out, int n) {{ int i = threadIdx.x; if (i < n) out[i] = v[i].y; }}\n"
    tr = _translate(source)
    assert not _kernel(tr, "bump").untranslatable
    assert f"__kernel void bump(__global {scalar}* v, __global float* out, int n)" in tr.text
    assert "out[i] = v[3*i+1];" in tr.text


POINTERS = """\
__global__ void walk(float3* v, float* raw, int n)
{
    int i = threadIdx.x;
    float3* q = v + 2 * i;
    q->x = 1.0f;
    q[1] = q[0];
    auto r = v + n;
    (*r).z = 2.0f;
    float3* a = (float3*)raw;
    float3* b = reinterpret_cast<float3*>(raw) + 1;
    a[i] = b[i];
    float3* e = v + n;
    for (float3* p = v; p != e; p++) p->y = 0.0f;
    q += n;
    float3* t = ++q;
    *q-- = v[n - 1];
    raw[0] = e - v;
}
"""


def test_pointer_arithmetic_and_local_pointers_count_scalars() -> None:
    tr = _translate(POINTERS)
    assert not _kernel(tr, "walk").untranslatable, _errors(tr)
    text = _flat(tr)
    assert "__global float* q = v + 3*(2 * i);" in text
    assert "q[0] = 1.0f;" in text
    assert "vstore3(vload3(0, q), 1, q);" in text
    assert "__global float* r = v + 3*n;" in text and "r[2] = 2.0f;" in text
    assert "__global float* a = (__global float*)raw;" in text
    assert "__global float* b = ((__global float*)(raw)) + 3;" in text
    assert "vstore3(vload3(i, b), i, a);" in text
    assert "for (__global float* p = v; p != e; p += 3) p[1] = 0.0f;" in text
    assert "q += 3*n;" in text and "__global float* t = (q += 3);" in text
    assert "vstore3(vload3(n - 1, v), 0, ((q -= 3) + 3));" in text
    assert "raw[0] = ((e - v) / 3);" in text


SPACES = """\
__device__ float3 first(const float3* p) { return p[0]; }
__global__ void both(float3* v, float3* out)
{
    __shared__ float3 tile[64];
    tile[threadIdx.x] = v[threadIdx.x];
    out[threadIdx.x] = first(tile + threadIdx.x);
    out[threadIdx.x + 64] = first(v + threadIdx.x);
}
"""


def test_shared_memory_keeps_opencls_own_vectors_and_a_helper_gets_one_variant_each() -> None:
    """A __shared__ float3 array never leaves the work-group: OpenCL C's layout is its own business.  A helper
    called with both memories is emitted twice, the global variant in CUDA's layout."""
    tr = _translate(SPACES)
    assert not _kernel(tr, "both").untranslatable, _errors(tr)
    text = _flat(tr)
    assert "__local float3 tile[64];" in text
    assert "tile[(uint)get_local_id(0)] = vload3((uint)get_local_id(0), v);" in text
    assert "float3 first(__local const float3* p) { return p[0]; }" in text
    assert "float3 first__global(__global const float* p) { return vload3(0, p); }" in text
    assert "vstore3(first(tile + (uint)get_local_id(0)), (uint)get_local_id(0), out);" in text
    assert "vstore3(first__global(v + 3*((uint)get_local_id(0))), (uint)get_local_id(0) + 64, out);" in text


def test_a_name_hidden_in_a_block_is_packed_again_after_it() -> None:
    source = (
        "__global__ void k(float3* v, float* out) { { float v = 2.0f; out[0] = v + 1; } out[1] = v[1].x; }\n"
    )
    text = _flat(_translate(source))
    assert "{ { float v = 2.0f; out[0] = v + 1; } out[1] = v[3]; }" in text


def test_model_written_code_is_told_of_a_by_value_argument() -> None:
    from porter.backends.opencl.dialect import OpenCLDialect

    tr = translate_to_opencl(FIXTURE.read_text(), str(FIXTURE))
    kernel = _kernel(tr, "bump")
    signature = ("__global float* v", "__global const float* w", "porter_packed_float3 d_packed", "int n")
    said = OpenCLDialect().model_constraints("bump", signature, kernel, False)
    assert "define `typedef struct { float x, y, z; } porter_packed_float3;` before the kernel" in said
    assert "read it as `(float3)(d_packed.x, d_packed.y, d_packed.z)`" in said


def test_a_three_component_vector_in_private_memory_is_translated() -> None:
    source = (
        "__global__ void bump(float* v, int n) { int i = threadIdx.x; float3 p = make_float3(v[i], 1.0f, 2.0f);"
        " if (i < n) v[i] = p.x + p.z; }\n"
    )
    tr = _translate(source)
    assert not _kernel(tr, "bump").untranslatable
    assert "float3 p = (float3)(v[i], 1.0f, 2.0f);" in tr.text


REFUSED = """\
struct Pair { float3* a; float3* b; };
__device__ void grow(float3* p) { p->x += 1.0f; }
__device__ void twice(float3& e) { e.x *= 2.0f; }
__device__ float3* next(float3* p) { return p + 1; }
__global__ void escape(float3* v, Pair* out, int n)
{
    int i = threadIdx.x;
    grow(&v[i]);
    atomicAdd(&v[i].x, 1.0f);
    out[i].a = v;
    Pair pair = {v, v + 1};
    twice(v[i]);
    float3& r = v[i];
    float3 s = v[i] = v[0];
    v[i++] += v[0];
    size_t bytes = sizeof(v[0]);
    float3* w = next(v);
}
"""


@pytest.mark.parametrize(
    ("line", "construct", "why"),
    [
        (
            8,
            "&v[i]",
            "the address of a float3 element in global memory taken (line 8): CUDA's float3 elements",
        ),
        (9, "&v[i].x", "atomicAdd on a float3 member in global memory (line 9)"),
        (10, "out[i].a = v", "a pointer to float3 in global memory stored (line 10)"),
        (11, "v", "a pointer to float3 in global memory stored in an initializer list (line 11)"),
        (
            12,
            "v[i]",
            "a float3 element in global memory bound to a reference (parameter 1 of twice) (line 12)",
        ),
        (13, "float3& r = v[i];", "a reference to a float3 element in global memory (line 13)"),
        (
            14,
            "v[i] = v[0]",
            "an assignment to a float3 element in global memory whose value is used (line 14)",
        ),
        (
            15,
            "v[i++] += v[0]",
            "a compound assignment to a float3 element whose index or pointer has side effects",
        ),
        (16, "sizeof(v[0])", "sizeof a float3 element in global memory (line 16)"),
        (4, "p + 1", "a pointer to float3 in global memory returned (line 4)"),
    ],
)
def test_what_cannot_keep_the_layout_is_refused_naming_it_and_its_line(
    line: int, construct: str, why: str
) -> None:
    tr = _translate(REFUSED)
    kernel = _kernel(tr, "escape")
    assert any(w.startswith(f"{construct}: {why}") for w in kernel.untranslatable), kernel.untranslatable
    assert any((at, shown) == (line, construct) and r.startswith(why) for at, shown, r in _errors(tr)), (
        _errors(tr)
    )
    # every refusal says both layouts
    assert all("CUDA's float3 elements are 12 bytes apart, OpenCL C's 16" in w for w in kernel.untranslatable)
    assert "/* porter: not translated to OpenCL C:" in tr.text and "__kernel void escape" not in tr.text


def test_the_layouts_are_data() -> None:
    from porter.backends.opencl.packed import packed_type
    from porter.backends.opencl.translate import tables

    sizes = tables()["three_component_sizes"]
    found = packed_type("const double3", sizes)
    assert found is not None and (found.scalar, found.cuda_bytes, found.opencl_bytes, found.const) == (
        "double",
        24,
        32,
        True,
    )
    assert packed_type("float4", sizes) is None and packed_type("float3*", sizes) is None
