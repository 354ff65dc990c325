"""CUDA constructs of real programs that once stopped the OpenCL build, each in a small kernel
written for these tests (``tests/fixtures/opencl_kernels``): translated, built on PoCL and run
against NumPy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opencl_launch import launch_translated
from porter.backends.opencl.translate import launch_geometry, translate_to_opencl

from porter.model import Severity, TranslatedKernel, Translation

KERNELS = Path(__file__).resolve().parents[2] / "fixtures" / "opencl_kernels"


def _translate(name: str, **kw: Any) -> Translation:
    path = KERNELS / name
    return translate_to_opencl(path.read_text(encoding="utf-8"), str(path), **kw)


def _kernel(tr: Translation, name: str) -> TranslatedKernel:
    found = [k for k in tr.kernels if k.name == name]
    assert found, f"no kernel {name} in {[k.name for k in tr.kernels]}"
    return found[0]


def _errors(tr: Translation) -> list[str]:
    return [f"{d.line}: {d.construct}: {d.reason}" for d in tr.diagnostics if d.severity == Severity.ERROR]


@pytest.fixture(scope="module")
def ocl() -> tuple[Any, Any]:
    """The OpenCL backend and its first device (PoCL's CPU device where installed)."""
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        pytest.skip("pyopencl is not installed (pip install pyopencl)")
    from porter.backends.opencl import OpenCLBackend

    backend = OpenCLBackend()
    devices = [d for d in backend.devices() if d.kind != "checker"]
    if not devices:
        pytest.skip("no OpenCL device (install pocl-opencl-icd for a CPU device)")
    return backend, devices[0]


def _run(
    ocl: tuple[Any, Any],
    tr: Translation,
    name: str,
    args: list[Any],
    grid: Any,
    block: Any,
    shared_bytes: int = 0,
) -> list[Any]:
    """Build kernel `name`, run it with `args` (CUDA order), return the arrays as they came back.
    `shared_bytes`: the launch's dynamic shared memory, the kernel's one added `__local` argument."""
    from porter.backends.isolate import LocalBuffer

    backend, device = ocl
    k = _kernel(tr, name)
    assert not k.untranslatable, k.untranslatable
    if shared_bytes:
        assert [e["kind"] for e in k.extra_args] == ["local"], k.extra_args
        args = [*args, LocalBuffer(shared_bytes)]
    else:
        assert not k.extra_args
    global_size, local_size = launch_geometry(grid, block)
    assert all(g % b == 0 for g, b in zip(global_size, local_size, strict=True))
    return launch_translated(backend, device, tr.text, k, args, grid, block)


# --------------------------------------------------------------------------- host data next to kernels


def test_host_data_is_left_out_of_the_program() -> None:
    tr = _translate("host_side.cu")
    assert not _errors(tr)
    assert "/* porter: host variable omitted: const char *program_name" in tr.text
    assert "phases[]" not in tr.text.split("omitted: const char *const phases[]")[1]
    for gone in ("SampleSet", "worker_arg_t", "Source", "ZeroSource"):
        assert f"{gone} omitted: unused */" in tr.text
    assert "pthread" not in tr.text.replace("#include <pthread.h>", "")
    assert "typedef struct {\n    float weight;" in tr.text  # the kernel's type stays


def test_a_type_named_only_by_a_launchs_template_argument_is_kept() -> None:
    src = (
        "typedef struct { float a; float b; } Pair;\n"
        "template <typename T> __global__ void fill(T* p) { p[threadIdx.x] = p[0]; }\n"
        "int main() { Pair* d; fill<Pair><<<1, 32>>>(d); return 0; }\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert "typedef struct { float a; float b; } Pair;" in tr.text
    assert "__kernel void fill_Pair(__global Pair* p)" in tr.text


def test_integer_arguments_of_math_functions_get_cudas_conversion() -> None:
    tr = _translate("host_side.cu")
    assert "log2((double)16)" in tr.text  # C++ <cmath>: integers only -> double
    assert "pow((float)2, (float)l)" in tr.text  # __powf takes floats
    assert "sqrt((float)tag)" in tr.text and "floor((float)(tag / 2))" in tr.text
    assert "pow((double)2, (double)LEVELS)" in tr.text


def test_mixed_or_unknown_math_arguments_are_left_alone() -> None:
    src = (
        "__global__ void k(float* p, int n) {\n"
        "  float x = p[0];\n"
        "  p[1] = pow(x, 2);\n"  # pow(float, int): OpenCL picks pow(float, float), as CUDA does
        "  p[2] = pow(x, n) + fmaxf(x, 1.0f);\n"
        "}\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert "pow(x, 2)" in tr.text and "pow(x, n)" in tr.text and "fmax(x, 1.0f)" in tr.text


def test_a_kernel_reading_a_host_pointer_is_untranslatable() -> None:
    src = 'const char *name = "x";\n__global__ void k(char* out) { out[0] = name[0]; }\n'
    tr = translate_to_opencl(src, "k.cu")
    assert _kernel(tr, "k").untranslatable
    assert any("host data" in e for e in _errors(tr))


@pytest.mark.integration
def test_run_host_side(ocl: tuple[Any, Any]) -> None:
    n = 100
    samples = np.zeros(n, dtype=[("weight", np.float32), ("tag", np.int32)])
    samples["weight"] = np.linspace(-1, 1, n, dtype=np.float32)
    samples["tag"] = np.arange(n) % 17
    tr = _translate("host_side.cu")
    out = _run(ocl, tr, "weigh", [samples, np.zeros(n, np.float32), np.int32(n)], (2,), (64,))[1]
    tag = samples["tag"]
    expect = 30 * samples["weight"] + np.sqrt(tag.astype(np.float32)) + 16 + tag // 2
    np.testing.assert_allclose(out, expect, rtol=1e-6, atol=1e-5)  # acc sums in another order


# --------------------------------------------------------------------------- float and double atomicMax / atomicMin


def test_float_atomic_min_max_become_compare_and_swap_helpers() -> None:
    tr = _translate("float_minmax.cu")
    assert not _errors(tr)
    assert "porter_atomic_max_f32_local(&block_max, x[i])" in tr.text
    assert "porter_atomic_min_f64_global(&dout[1], y[i])" in tr.text
    assert "static float porter_atomic_max_f32_local(volatile __local float* p, float v)" in tr.text
    assert "static double porter_atomic_min_f64_global(volatile __global double* p, double v)" in tr.text
    assert "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" in tr.text


@pytest.mark.integration
def test_run_float_atomic_min_max(ocl: tuple[Any, Any]) -> None:
    rng = np.random.default_rng(11)
    n, block = 1000, 128
    grid = (n + block - 1) // block
    x = rng.standard_normal(n).astype(np.float32) * 100
    y = rng.standard_normal(n) * 1e3
    seen = np.concatenate([rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32)])
    fout = np.array([-1e30, 1e30], np.float32)
    dout = np.array([-1e300, 1e300])
    tr = _translate("float_minmax.cu")
    out = _run(ocl, tr, "extremes", [x, y, fout, dout, seen.copy(), np.int32(n)], (grid,), (block,))
    fout_o, dout_o, seen_o = out[2], out[3], out[4]
    assert fout_o[0] == x.max() and fout_o[1] == x.min()
    assert dout_o[0] == y.max() and dout_o[1] == y.min()
    np.testing.assert_array_equal(seen_o[:n], np.maximum(seen[:n], np.float32(0.5)))
    np.testing.assert_array_equal(seen_o[n:], seen[:n])  # the old values


# --------------------------------------------------------------------------- reference parameters


def test_reference_parameters_become_pointers_per_memory() -> None:
    tr = _translate("references.cu")
    assert not _errors(tr)
    assert "void accumulate(float* acc, float v) { (*acc) += v; }" in tr.text
    assert "accumulate(&(*acc), v);" in tr.text  # a reference passed on
    assert "void bump(int* counter, const int step_)" in tr.text  # const T& is a value
    assert "bump(&steps, 3);" in tr.text
    assert "void swap_values__global_global(__global float* a, __global float* b)" in tr.text
    assert "swap_values__global_global(&out[n + i], &out[2 * n + i]);" in tr.text
    assert "int count_hit(__local int* hits)" in tr.text and "count_hit(&block_hits);" in tr.text
    assert "return atomic_add(&(*hits), 1);" in tr.text


def test_reference_to_an_unknown_memory_is_reported() -> None:
    src = "__device__ void inc(int& x) { x++; }\n__global__ void k(int* p) { inc(p[0] + 1); }\n"
    tr = translate_to_opencl(src, "k.cu")
    assert _kernel(tr, "k").untranslatable
    assert any("a reference" in e for e in _errors(tr))


@pytest.mark.integration
def test_run_references(ocl: tuple[Any, Any]) -> None:
    n, block = 300, 64
    grid = (n + block - 1) // block
    x = np.linspace(-3, 3, n, dtype=np.float32)
    out = np.concatenate([np.zeros(n), np.arange(n), -np.arange(n)]).astype(np.float32)
    tr = _translate("references.cu")
    got = _run(ocl, tr, "references", [x, out, np.zeros(grid + 1, np.int32), np.int32(n)], (grid,), (block,))
    out_o, counts = got[1], got[2]
    np.testing.assert_allclose(out_o[:n], 2 * x + 4 - 10 * x, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out_o[n : 2 * n], -np.arange(n, dtype=np.float32))
    np.testing.assert_array_equal(out_o[2 * n :], np.arange(n, dtype=np.float32))
    assert counts[0] == n
    np.testing.assert_array_equal(counts[1:], np.minimum(block, n - block * np.arange(grid)))


# --------------------------------------------------------------------------- auto locals


def test_auto_locals_get_the_initializers_type() -> None:
    tr = _translate("auto_locals.cu")
    assert not _errors(tr)
    assert "uint i = (uint)get_group_id(0)" in tr.text and "uint t = (uint)get_local_id(0);" in tr.text
    assert "float scale = 0.5f;" in tr.text and "int big = 1 << 20;" in tr.text
    assert "float v = i < n ? x[i] : 0.0f;" in tr.text
    assert "__local float* row = &tile[0];" in tr.text
    assert "__global const float* src = x + i;" in tr.text
    assert "__global const float* twin = (__global const float*)src;" in tr.text
    assert "float root = sqrt(fabs(v));" in tr.text and "int doubled = twice(half_n);" in tr.text
    assert "long wide = (long)big * 4096;" in tr.text and "const float bias = (float)doubled;" in tr.text
    assert "auto " not in tr.text.split("__kernel")[1]


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ("auto v = make_float2(p[0], p[1]); p[0] = v.x;", "v"),
        ("auto q = unknown_helper(p); p[0] = q;", "q"),
        ("auto& r = p[0]; r = 1.0f;", "reference"),
    ],
)
def test_auto_without_a_type_porter_can_tell_is_an_error(body: str, name: str) -> None:
    tr = translate_to_opencl(f"__global__ void k(float* p) {{ {body} }}\n", "k.cu")
    assert _kernel(tr, "k").untranslatable
    assert any("auto" in e and name in e for e in _errors(tr)), _errors(tr)


@pytest.mark.integration
def test_run_auto_locals(ocl: tuple[Any, Any]) -> None:
    n, block = 200, 64
    grid = (n + block - 1) // block
    x = np.linspace(-2, 2, n, dtype=np.float32)
    tr = _translate("auto_locals.cu")
    out = _run(
        ocl,
        tr,
        "auto_locals",
        [x, np.zeros(n, np.float32), np.zeros(n, np.uint32), np.int32(n)],
        (grid,),
        (block,),
    )
    bias = np.float32(2 * (n // 2))
    expect = x * np.float32(0.5) + x + np.sqrt(np.abs(x)) + bias + np.float32(1)  # (2**20 * 4096) >> 32
    np.testing.assert_allclose(out[1], expect, rtol=1e-6)
    np.testing.assert_array_equal(out[2], np.arange(n) // block * block)


# --------------------------------------------------------------------------- float -> integer conversions


def test_float_to_integer_conversions_are_kept_as_c_casts() -> None:
    """OpenCL C converts floating point to integers toward zero, as CUDA's C++ casts do (for values
    in range: out of range both are undefined), so the casts stay casts; CUDA's __float2int_r*
    intrinsics are the ones that name a rounding (convert_int_rt*)."""
    tr = _translate("float_to_int.cu")
    assert not _errors(tr)
    assert "as_int[2 * i] = (int)f;" in tr.text and "int implicit = f;" in tr.text
    assert (
        "(unsigned char)(fabs(f) * 10.0f)" in tr.text and "unsigned char pixel = fabs(f) * 10.0f;" in tr.text
    )
    assert "as_long[i] = (long)(y[i] * 1e6);" in tr.text


@pytest.mark.integration
def test_run_float_to_integer_conversions(ocl: tuple[Any, Any]) -> None:
    n, block = 500, 128
    grid = (n + block - 1) // block
    rng = np.random.default_rng(12)
    x = rng.uniform(-25.4, 25.4, n).astype(np.float32)
    x[:8] = [0.0, -0.0, 0.999, -0.999, 1.5, -1.5, 25.49, -2.5]
    y = rng.uniform(-1e3, 1e3, n)
    tr = _translate("float_to_int.cu")
    args = [
        x,
        y,
        np.zeros(2 * n, np.int32),
        np.zeros(2 * n, np.uint8),
        np.zeros(n, np.int16),
        np.zeros(n, np.uint32),
        np.zeros(n, np.int64),
        np.int32(n),
    ]
    out = _run(ocl, tr, "to_integers", args, (grid,), (block,))
    as_int, as_byte, as_short, as_uint, as_long = out[2:]
    np.testing.assert_array_equal(as_int, np.repeat(np.trunc(x), 2).astype(np.int32))
    byte = np.trunc(np.abs(x) * np.float32(10)).astype(np.uint8)  # 0 .. 254: in range
    np.testing.assert_array_equal(as_byte, np.repeat(byte, 2))
    np.testing.assert_array_equal(as_short, np.trunc(x * np.float32(100)).astype(np.int16))
    np.testing.assert_array_equal(as_uint, np.trunc(np.abs(x * np.float32(1000))).astype(np.uint32))
    np.testing.assert_array_equal(as_long, np.trunc(y * 1e6).astype(np.int64))


# --------------------------------------------------------------------------- shared-memory accessor templates


def test_shared_memory_accessor_becomes_the_dynamic_local_argument() -> None:
    tr = _translate("shared_accessor.cu")
    assert not _errors(tr)
    assert "struct DynamicScratch omitted: uses become the dynamic __local argument */" in tr.text
    assert "struct DynamicScratch<double> omitted" in tr.text
    assert "__global float *sums, unsigned count, __local float* scratch_words)" in tr.text
    assert "__local float *tile = ((__local float*)scratch_words);" in tr.text
    assert "__local int *tile = ((__local int*)scratch_words);" in tr.text
    # the double specialisation's own array
    assert "__global double *sums, unsigned count, __local double* scratch_doubles)" in tr.text
    assert "__local double *tile = ((__local double*)scratch_doubles);" in tr.text
    # the handle style: the declaration goes, the method call is the argument
    assert "/* porter: DynamicScratch<int> scratch: the dynamic __local argument */" in tr.text
    assert "__local int *cell = ((__local int*)scratch_words);" in tr.text
    assert "__local double *cell = ((__local double*)scratch_doubles);" in tr.text
    for k in tr.kernels:
        assert k.extra_args[0]["kind"] == "local" and k.arg_map[-1] is None, k


SAMPLES_STYLE = """
template <class T> struct SharedMemory {
    __device__ T *getPointer() { extern __device__ void error(void); error(); return NULL; }
};
template <> struct SharedMemory<float> {
    __device__ float *getPointer() { extern __shared__ float s_float[]; return s_float; }
};
template <> struct SharedMemory<unsigned int> {
    __device__ unsigned int *getPointer() { extern __shared__ unsigned int s_uint[]; return s_uint; }
};
template <class T> __global__ void twice(T *data) {
    SharedMemory<T> smem;
    T *s = smem.getPointer();
    s[threadIdx.x] = data[threadIdx.x];
    __syncthreads();
    data[threadIdx.x] = s[threadIdx.x] * (T)2;
}
int main() {
    float *f; unsigned int *u; short *h;
    twice<float><<<1, 32, 128>>>(f);
    twice<unsigned int><<<1, 32, 128>>>(u);
    twice<short><<<1, 32, 64>>>(h);
}
"""


def test_accessor_specialisations_pick_their_array_and_the_primary_guard_is_an_error() -> None:
    tr = translate_to_opencl(SAMPLES_STYLE, "k.cu")
    assert "__kernel void twice_float(__global float *data, __local float* s_float)" in tr.text
    assert "__local float *s = ((__local float*)s_float);" in tr.text
    assert "__local unsigned int *s = ((__local unsigned int*)s_uint);" in tr.text
    assert not _kernel(tr, "twice<float>").untranslatable
    assert not _kernel(tr, "twice<unsigned int>").untranslatable
    # the primary template hands out no shared memory (it calls error()): no element type of its own
    assert _kernel(tr, "twice<short>").untranslatable
    assert any("SharedMemory<short>" in e and ".getPointer()" in e for e in _errors(tr)), _errors(tr)


def test_accessor_next_to_the_kernels_own_extern_shared_array_shares_the_argument() -> None:
    src = (
        "template <class T> struct Smem { __device__ operator T*() {"
        " extern __shared__ int raw[]; return (T*)raw; } };\n"
        "template <class T> __global__ void k(T* p) {\n"
        "  extern __shared__ char bytes[];\n"
        "  T* s = Smem<T>();\n"
        "  bytes[0] = 1; s[1] = p[0]; p[1] = ((T*)Smem<T>())[1];\n"
        "}\n"
        "int main() { float* p; k<float><<<1, 32, 64>>>(p); }\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert not _errors(tr)
    assert "__kernel void k_float(__global float* p, __local char* bytes)" in tr.text
    assert "__local float* s = ((__local float*)bytes);" in tr.text
    assert "p[1] = ((__local float*)((__local float*)bytes))[1];" in tr.text
    assert len(_kernel(tr, "k<float>").extra_args) == 1


def test_accessor_in_a_device_helper_is_an_error() -> None:
    src = (
        "template <class T> struct Smem { __device__ operator T*() {"
        " extern __shared__ float raw[]; return (T*)raw; } };\n"
        "__device__ float* scratch() { return Smem<float>(); }\n"
        "__global__ void k(float* p) { float* s = scratch(); s[0] = p[0]; }\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert _kernel(tr, "k").untranslatable
    assert any("Smem<float>" in e and "helper" in e for e in _errors(tr)), _errors(tr)


def test_struct_templates_that_are_not_accessors_are_still_omitted() -> None:
    src = (
        "template <class T> struct Sum { __device__ T operator()(T a, T b) const { return a + b; } };\n"
        "template <class T> struct Box { T value; };\n"
        "__global__ void k(float* p) { p[0] = 1.0f; }\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert "/* porter: template <class T> struct Sum omitted: OpenCL C has no templates */" in tr.text
    assert "/* porter: template <class T> struct Box omitted: OpenCL C has no templates */" in tr.text
    assert not _kernel(tr, "k").untranslatable


@pytest.mark.integration
def test_run_shared_memory_accessor(ocl: tuple[Any, Any]) -> None:
    count, block = 1000, 128
    grid = (count + block - 1) // block
    rng = np.random.default_rng(13)
    tr = _translate("shared_accessor.cu")
    for ctype, dtype in (("float", np.float32), ("int", np.int32), ("double", np.float64)):
        src = (rng.integers(-1000, 1000, count)).astype(dtype)
        size = block * np.dtype(dtype).itemsize
        _, flipped, sums = _run(
            ocl,
            tr,
            f"flip_and_sum<{ctype}>",
            [src, np.zeros(count, dtype), np.zeros(grid, dtype), np.uint32(count)],
            (grid,),
            (block,),
            shared_bytes=size,
        )
        padded = np.concatenate([src, np.zeros(grid * block - count, dtype)]).reshape(grid, block)
        np.testing.assert_array_equal(flipped, padded[:, ::-1].reshape(-1)[:count])
        np.testing.assert_array_equal(sums, padded.sum(axis=1))  # integers: exact in any order
        if ctype == "float":
            continue
        (scaled,) = _run(
            ocl, tr, f"times_block_size<{ctype}>", [src], (grid - 1,), (block,), shared_bytes=size
        )
        body = src[: (grid - 1) * block].reshape(grid - 1, block)
        np.testing.assert_array_equal(scaled[: (grid - 1) * block], (block * body[:, ::-1]).reshape(-1))


# --------------------------------------------------------------------------- C++ struct names, bool arrays


def test_structs_named_without_the_struct_keyword_get_a_typedef() -> None:
    tr = _translate("bare_names.cu")
    assert not _errors(tr)
    for kind, name in (("struct", "Body"), ("union", "Word"), ("struct", "Fence")):
        assert f"}};\ntypedef {kind} {name} {name}; /* porter: C++ names it {name} */" in tr.text
    assert "Body advance(Body b, float dt)" in tr.text and "Word w;" in tr.text


def test_no_second_typedef_for_a_name_the_file_typedefs_or_an_omitted_type() -> None:
    src = (
        "struct A { int x; };\ntypedef struct A A;\n"
        "typedef struct B { int y; } B;\n"
        "typedef struct C { int z; } Cee;\n"
        "struct Host { int fd; };\n"
        "__global__ void k(A* a, B* b, C* c) { a->x = b->y + c->z; }\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert tr.text.count("typedef struct A A;") == 1 and "typedef struct B B;" not in tr.text
    assert "typedef struct C { int z; } Cee;\ntypedef struct C C; /* porter: C++ names it C */" in tr.text
    assert "struct Host omitted: unused */" in tr.text and "typedef struct Host" not in tr.text


def test_bool_arrays_are_uchar_arrays_like_bool_scalars() -> None:
    tr = _translate("bare_names.cu")
    assert "__global const uchar *frozen, __global uchar *escaped," in tr.text
    assert "float dt, uchar bounce, int count)" in tr.text  # [kernel_param_types]: bool -> uchar
    assert "__global uchar *mark = escaped + i;" in tr.text
    assert "void flag(__global uchar *marks, int i, bool value)" in tr.text
    assert "bool out = outside(fence, b.position);" in tr.text  # private bools stay bool


def test_bool_pointers_into_other_memories_stay_bool() -> None:
    src = (
        "__device__ void set(bool* f) { f[0] = true; }\n"
        "__global__ void k(int* p) { __shared__ bool seen[32]; bool mine[2];\n"
        "  set(seen); set(mine); bool* q = seen; p[0] = q[0] + mine[0]; }\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert not _errors(tr)
    assert "void set__local(__local bool* f)" in tr.text or "void set(__local bool* f)" in tr.text
    assert "(bool* f)" in tr.text  # the private variant
    assert "__local bool* q = seen;" in tr.text


@pytest.mark.integration
def test_run_bare_names(ocl: tuple[Any, Any]) -> None:
    count, block = 300, 64
    grid = (count + block - 1) // block
    body = np.dtype([("position", np.float32), ("speed", np.float32), ("hits", np.int32)])
    fence_t = np.dtype([("low", np.float32), ("high", np.float32)])
    bodies = np.zeros(count, body)
    bodies["position"] = np.linspace(-2, 2, count, dtype=np.float32)
    bodies["speed"] = np.linspace(3, -3, count, dtype=np.float32)
    bodies["hits"] = np.arange(count) % 3
    fence = np.array([(-1.5, 1.5)], fence_t)
    frozen = (np.arange(count) % 4 == 0).astype(np.bool_)
    escaped = np.ones(count, np.bool_)
    tr = _translate("bare_names.cu")
    args = [
        bodies,
        fence,
        frozen,
        escaped,
        np.zeros(count, np.uint32),
        np.float32(0.25),
        np.uint8(1),
        np.int32(count),
    ]
    out_bodies, _, _, out_escaped, out_sign = _run(ocl, tr, "move_bodies", args, (grid,), (block,))
    pos = np.where(frozen, bodies["position"], bodies["position"] + bodies["speed"] * np.float32(0.25))
    out = (pos < np.float32(-1.5)) | (pos > np.float32(1.5))
    np.testing.assert_array_equal(out_bodies["position"], pos)
    np.testing.assert_array_equal(out_bodies["speed"], np.where(out, -bodies["speed"], bodies["speed"]))
    np.testing.assert_array_equal(out_bodies["hits"], bodies["hits"] + out)
    np.testing.assert_array_equal(out_escaped, out)
    np.testing.assert_array_equal(out_sign, (pos < 0) | ((pos == 0) & np.signbit(pos)))


# --------------------------------------------------------------------------- functional casts


def test_functional_casts_become_c_casts() -> None:
    tr = _translate("functional_casts.cu")
    assert not _errors(tr)
    assert "#define HALF(v) (((fp)(v)) * ((fp)(0.5)))" in tr.text  # inside a macro body
    assert "return ((real)(1)) / (((real)(1)) + a * a);" in tr.text  # a typedef, in a helper
    assert "pow(fabs(v), ((fp)(1.6)))" in tr.text  # a type macro
    assert "((float)(k[i])) / ((fp)(3)) + smooth(((real)(k[i])))" in tr.text
    assert "((real)(((double)(v)) * 2.0))" in tr.text
    assert "((fp)(((word)(k[i])) >> 1))" in tr.text
    assert "((int)(((unsigned)(k[i])) % 7u))" in tr.text
    assert "out[i] = ((float)(i)) / ((float)(4));" in tr.text  # T(i) in the float instance


def test_calls_that_are_not_functional_casts_are_left_alone() -> None:
    src = (
        "#define N 16\n"
        "#define TWICE(f) (f(2) + f(2))\n"
        "#define SIG float (*sig)(float)\n"
        "typedef struct { float a; } Box;\n"
        "__device__ float scale(float x) { return x * N; }\n"
        "__global__ void k(float* p) {\n"
        "  p[0] = scale(p[1]) + (float)(p[2]) + TWICE(scale) + sizeof(float);\n"
        "}\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert not _errors(tr)
    assert "p[0] = scale(p[1]) + (float)(p[2]) + TWICE(scale) + sizeof(float);" in tr.text
    assert "#define TWICE(f) (f(2) + f(2))" in tr.text
    assert "#define SIG float (*sig)(float)" in tr.text


def test_type_aliases_through_each_other_and_keywords() -> None:
    src = (
        "#define REAL real_t\n"
        "typedef double real_t;\n"
        "typedef unsigned long long u64;\n"
        "__global__ void k(double* p, unsigned long long* q, int n) {\n"
        "  p[0] = REAL(n) + real_t(1);\n"
        "  q[0] = u64(n) + (unsigned long long)long(n) + short(n) + signed(n) + bool(n) + char(n);\n"
        "}\n"
    )
    tr = translate_to_opencl(src, "k.cu")
    assert not _errors(tr)
    assert "p[0] = ((REAL)(n)) + ((real_t)(1));" in tr.text
    assert "((u64)(n)) + (ulong)((long)(n)) + ((short)(n)) + ((signed)(n)) + ((bool)(n)) + ((char)(n))" in (
        tr.text
    )


@pytest.mark.integration
def test_run_functional_casts(ocl: tuple[Any, Any]) -> None:
    n, block = 200, 64
    grid = (n + block - 1) // block
    x = np.linspace(-3, 3, n, dtype=np.float32)
    k = np.arange(n, dtype=np.int32) - 60
    tr = _translate("functional_casts.cu")
    args = [x, k, np.zeros(4 * n, np.float32), np.zeros(2 * n, np.int32), np.int32(n)]
    out, iout = _run(ocl, tr, "casts", args, (grid,), (block,))[2:4]
    out, iout = out.reshape(n, 4), iout.reshape(n, 2)
    kf = k.astype(np.float32)
    np.testing.assert_allclose(out[:, 0], np.abs(x) ** np.float32(1.6), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 1], kf / 3 + 1 / (1 + kf * kf), rtol=1e-6)
    np.testing.assert_allclose(
        out[:, 2], kf * np.float32(0.5) + (x.astype(np.float64) * 2).astype(np.float32)
    )
    np.testing.assert_array_equal(out[:, 3], (k.astype(np.uint32) >> 1).astype(np.float32))
    np.testing.assert_array_equal(iout[:, 0], np.trunc(x * np.float32(10)).astype(np.int32))
    np.testing.assert_array_equal(iout[:, 1], (k.astype(np.uint32) % 7).astype(np.int32))
    ramp = _run(ocl, tr, "ramp<float>", [np.zeros(32, np.float32), np.int32(32)], (1,), (32,))[0]
    np.testing.assert_array_equal(ramp, np.arange(32, dtype=np.float32) / 4)


# --------------------------------------------------------------------------- 64-bit integers, struct atomics

_M64 = (1 << 64) - 1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _mix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def _hash_reference(key: bytes, seed: int) -> tuple[int, int]:
    """hash64.cu's hash in Python integers, from the algorithm's description."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed
    nblocks = len(key) // 16
    for b in range(nblocks):
        k1 = int.from_bytes(key[16 * b : 16 * b + 8], "little")
        k2 = int.from_bytes(key[16 * b + 8 : 16 * b + 16], "little")
        k1 = (_rotl((k1 * c1) & _M64, 31) * c2) & _M64
        h1 ^= k1
        h1 = (_rotl(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * c2) & _M64, 33) * c1) & _M64
        h2 ^= k2
        h2 = (_rotl(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = key[16 * nblocks :]
    if len(key) & 15 in (1, 2, 3):
        k1 = 0
        for j in range((len(key) & 15) - 1, -1, -1):
            k1 ^= tail[j] << (8 * j)
        h1 ^= (_rotl((k1 * c1) & _M64, 31) * c2) & _M64
    h1 ^= len(key)
    h2 ^= len(key)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _mix(h1), _mix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


def test_a_64_bit_hash_with_stdint_names_builds_and_matches_the_algorithm(ocl: tuple[Any, Any]) -> None:
    tr = _translate("hash64.cu")
    assert not _errors(tr)
    # <stdint.h> names parse as primitive types and still become OpenCL's
    assert "__global const uchar* keys" in tr.text and "ulong seed" in tr.text and "uint64_t" not in tr.text
    n, stride, key_bytes, seed = 64, 48, 35, 0x9E3779B97F4A7C15  # two blocks and a three-byte tail
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 256, n * stride, dtype=np.uint8)
    out = np.zeros(2 * n, dtype=np.uint64)
    _, got = _run(
        ocl, tr, "hash_keys",
        [keys, np.int32(stride), np.int32(key_bytes), np.uint64(seed), out, np.int32(n)], (2, 1, 1), (32, 1, 1),
    )  # fmt: skip
    want = [
        v
        for i in range(n)
        for v in _hash_reference(keys[i * stride : i * stride + key_bytes].tobytes(), seed)
    ]
    assert [int(v) for v in got] == want


def test_atomics_on_struct_fields_in_global_memory(ocl: tuple[Any, Any]) -> None:
    tr = _translate("member_atomics.cu")
    assert not _errors(tr)
    assert "atomic_add(&b->count, 1)" in tr.text and "atomic_max(&(b->max_bits)" in tr.text
    assert "porter_atomic_add_f32_global(&bins[which[i]].sum" in tr.text
    n, nbins = 1024, 8
    rng = np.random.default_rng(3)
    values = rng.uniform(0.0, 4.0, n).astype(np.float32)
    which = rng.integers(0, nbins, n).astype(np.int32)
    bins = np.zeros(nbins, dtype=[("count", np.int32), ("sum", np.float32), ("max_bits", np.uint32)])
    *_, got = _run(ocl, tr, "bin_values", [values, which, bins, np.int32(n)], (n // 64, 1, 1), (64, 1, 1))
    got = got.view(bins.dtype) if got.dtype != bins.dtype else got
    for b in range(nbins):
        mine = values[which == b]
        assert got["count"][b] == len(mine)
        assert got["sum"][b] == pytest.approx(float(mine.sum(dtype=np.float64)), rel=1e-5)
        assert got["max_bits"][b] == mine.view(np.uint32).max()  # non-negative floats order as their bits


def test_mul24_with_mixed_argument_types_builds_and_runs(ocl: tuple[Any, Any]) -> None:
    tr = _translate("mul24.cu")
    assert not _errors(tr)
    assert "#define porter_mul24(a, b) mul24((int)(a), (int)(b))" in tr.text  # CUDA's __mul24 takes ints
    assert "#define IMUL(a, b) porter_mul24(a, b)" in tr.text
    n = 256
    data = np.arange(n, dtype=np.int32)
    _, got = _run(ocl, tr, "spread", [data, np.zeros(n, np.int32), np.int32(n)], (2, 1, 1), (128, 1, 1))
    lane = np.arange(n) % 128
    np.testing.assert_array_equal(got, data + (lane >> 5) * 64 + lane * 3)


# --------------------------------------------------------------------------- heartwall's shapes


def test_a_bounds_test_cpp_reads_as_a_template_call_is_kept_as_comparisons() -> None:
    """`row < (a + b) && col > (c - 1)`: tree-sitter's C++ reads `row<...>(c - 1)`, a call of a function
    template; `row` is a variable of the kernel, so the text is the comparisons it was written as."""
    tr = _translate("window_compare.cu")
    assert not _kernel(tr, "inside").untranslatable
    assert (
        "row < ((*d_window).pad_rows + (*d_window).rows) &&\n        col > ((*d_window).pad_cols - 1) &&"
        in tr.text
    )
    # abs of a float is C++'s floating overload: fabs where the type is known, porter's helper where not
    assert "v = fabs(in[row * width + col]) * porter_abs((*d_window).scale);" in tr.text
    assert (
        "static inline __attribute__((overloadable)) float porter_abs(float x) { return fabs(x); }" in tr.text
    )


def test_a_constant_struct_holding_a_device_pointer_is_refused_where_the_pointer_is_read() -> None:
    tr = _translate("window_compare.cu")
    assert not _kernel(tr, "counted").untranslatable  # its counts only
    (why,) = _kernel(tr, "followed").untranslatable
    assert why == (
        "d_tracked: reads the __constant__ d_tracked, whose Tracked holds device pointers (values): an OpenCL "
        "kernel reaches a buffer through its arguments only, never through a pointer the program stored in memory"
    )
    assert "39: d_tracked: reads the __constant__ d_tracked" in _errors(tr)[0]


@pytest.mark.integration
def test_run_a_bounds_test_and_abs_of_floats(ocl: tuple[Any, Any]) -> None:
    backend, device = ocl
    width, height = 24, 16
    rng = np.random.default_rng(5)
    image = rng.uniform(-4, 4, (height, width)).astype(np.float32)
    window = np.array(
        [(2, 9, 3, 12, -1.5)],
        dtype=[("pad_rows", "<i4"), ("rows", "<i4"), ("pad_cols", "<i4"), ("cols", "<i4"), ("scale", "<f4")],
    )
    tr = _translate("window_compare.cu")
    k = _kernel(tr, "inside")
    args = [image.ravel(), np.zeros(width * height, np.float32), np.int32(width), np.int32(height), window]
    out = launch_translated(backend, device, tr.text, k, args, (3, 2), (8, 8))[1].reshape(height, width)
    rows, cols = np.mgrid[0:height, 0:width]
    inside = (rows > 1) & (rows < 11) & (cols > 2) & (cols < 15)
    expect = np.where(inside, np.abs(image) * np.float32(1.5), np.float32(0)) + np.float32(3)
    np.testing.assert_array_equal(out, expect)
