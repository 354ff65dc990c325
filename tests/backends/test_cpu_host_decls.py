"""A kernel's file may include headers holding host code that calls the CUDA / HIP runtime (a timer class
on HIP events, an error check on cudaGetErrorString): the emulator's kernel build compiles them as they
are, against the host API porter_host_decls.h declares, and a kernel still validates.  None of those
functions does anything there: device code that calls one fails its launch, naming the call."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CannotEmulate, CompileError, CompileOptions, LaunchError
from porter.backends.cpu import CpuBackend

from porter.harness.trial import ValidateOptions
from porter.harness.validate import Reference, validate
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant
from porter.scan.extract import device_code

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "host_headers"
TIMED = (HERE / "saxpy_timed.hip").read_text()

# The CUDA spellings a header of a CUDA program keeps: an error-check macro over an inline function,
# events, allocations, a copy to a __constant__ symbol, device properties, a stream.
CUDA_HEADER = """\
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define checkCuda(call) check_cuda((call), __FILE__, __LINE__)
inline cudaError_t check_cuda(cudaError_t result, const char* file, int line) {
    if (result != cudaSuccess) {
        fprintf(stderr, "%s:%d: CUDA error %d: %s (%s)\\n", file, line, (int)result,
                cudaGetErrorString(result), cudaGetErrorName(result));
        exit(1);
    }
    return result;
}
struct CudaClock {
    cudaEvent_t a, b;
    cudaStream_t s;
    CudaClock() { checkCuda(cudaEventCreate(&a)); checkCuda(cudaEventCreateWithFlags(&b, cudaEventDefault));
                  checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
    ~CudaClock() { cudaEventDestroy(a); cudaEventDestroy(b); cudaStreamDestroy(s); }
    void tic() { cudaEventRecord(a, s); }
    float toc() { cudaEventRecord(b, s); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); return ms; }
};
template <class T> T* device_array(size_t n, const T* from) {
    T* p;
    checkCuda(cudaMalloc(&p, n * sizeof(T)));
    checkCuda(cudaMemcpyAsync(p, from, n * sizeof(T), cudaMemcpyHostToDevice, 0));
    checkCuda(cudaMemset(p, 0, 0));
    checkCuda(cudaDeviceSynchronize());
    checkCuda(cudaPeekAtLastError());
    return p;
}
inline void release(void* p) { checkCuda(cudaFree(p)); checkCuda(cudaGetLastError()); }
inline int sm_count() {
    cudaDeviceProp prop;
    int dev = 0;
    checkCuda(cudaGetDevice(&dev));
    checkCuda(cudaGetDeviceProperties(&prop, dev));
    int attr = 0;
    cudaDeviceGetAttribute(&attr, cudaDevAttrMultiProcessorCount, dev);
    printf("%s sm_%d%d warp %d\\n", prop.name, prop.major, prop.minor, prop.warpSize);
    return prop.multiProcessorCount + attr;
}
template <class S> void upload_symbol(const S& symbol, const void* from, size_t bytes) {
    checkCuda(cudaMemcpyToSymbol(symbol, from, bytes));
}
"""
# a static object: constructed when a trusted kernel loads, where its calls do nothing and succeed
STATIC_CLOCK = "CudaClock g_clock;\n"

CUDA_KERNEL = """\
#include "cuda_clock.h"
__constant__ float weights[4];
__global__ void weigh(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = weights[i % 4] * x[i];
}
"""

SAXPY_SPEC = KernelSpec(
    kernel="saxpy_timed",
    args=(
        ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ArgSpec("a", "float32", Role.SCALAR, value="1.5f"),
        ArgSpec("x", "float32", Role.IN, ("n",)),
        ArgSpec("y", "float32", Role.INOUT, ("n",)),
    ),
    grid=("(n + 255) / 256",),
    block=("256",),
    sizes=({"n": 1000}, {"n": 4096}),
)


def _saxpy(n: int, a: float, x: np.ndarray, y: np.ndarray) -> None:
    y[:] = np.float32(a) * x + y


@pytest.mark.parametrize("untrusted", [False, True], ids=["trusted", "untrusted"])
def test_a_kernel_whose_file_includes_a_hip_timer_header_validates(untrusted: bool) -> None:
    """The replayed source is the file's device code; its timer header (hipEventCreate, hipEventRecord,
    hipEventElapsedTime, a CHECK_CUDA macro over cudaGetErrorString / cudaDeviceSynchronize) is compiled
    as it is -- and for untrusted code too, with the host functions poisoned and its imports checked."""
    cpu = CpuBackend()
    variant = Variant(kernel="saxpy_timed", target="hip", source=device_code(TIMED), entry="saxpy_timed",
                      provenance="user")  # fmt: skip
    options = ValidateOptions(
        trials=2, compile=CompileOptions(include_dirs=(str(HERE),), untrusted=untrusted)
    )
    verdicts = validate(variant, SAXPY_SPEC, Reference(python=_saxpy), cpu.devices(), options)
    assert [v.status for v in verdicts] == [Status.VALIDATED] * len(verdicts), [v.reason for v in verdicts]


@pytest.mark.parametrize("untrusted", [False, True], ids=["trusted", "untrusted"])
def test_a_cuda_header_of_runtime_calls_builds_and_its_kernel_runs(tmp_path: Path, untrusted: bool) -> None:
    (tmp_path / "cuda_clock.h").write_text(CUDA_HEADER + ("" if untrusted else STATIC_CLOCK))
    cpu = CpuBackend()
    device = cpu.devices()[0]
    options = CompileOptions(include_dirs=(str(tmp_path),), untrusted=untrusted)
    prog = cpu.load(cpu.compile(CUDA_KERNEL, "weigh", options, device), device)  # g_clock built at load
    w = np.array([1, 2, 3, 4], dtype=np.float32)
    prog.set_symbol("weights", w)
    n = 300
    x = np.arange(n, dtype=np.float32)
    dy = cpu.alloc(4 * n)
    prog(cpu.to_device(x), dy, np.int32(n), grid=(2,), block=(256,))
    np.testing.assert_array_equal(cpu.to_host(dy, np.float32, (n,)), np.tile(w, n // 4) * x)


def test_an_untrusted_kernel_still_may_not_run_host_code_when_it_loads(tmp_path: Path) -> None:
    """The declarations open nothing to untrusted code: a static object of a header (code run at load
    time, registered with the C++ runtime) is refused by the import check as before."""
    (tmp_path / "cuda_clock.h").write_text(CUDA_HEADER + STATIC_CLOCK)
    options = CompileOptions(include_dirs=(str(tmp_path),), untrusted=True)
    with pytest.raises(CompileError, match="host symbol"):
        CpuBackend().compile(CUDA_KERNEL, "weigh", options)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("hipEvent_t e; hipEventCreate(&e);", "hipEventCreate"),
        ("float* p; cudaMalloc(&p, 4);", "cudaMalloc"),
        ('printf("%s", cudaGetErrorString(cudaErrorInvalidValue));', "cudaGetErrorString"),
        ("hipDeviceProp_t prop; hipGetDeviceProperties(&prop, 0);", "hipGetDeviceProperties"),
        # a header's void host function: left out of the kernel's build, and named when reached
        ("timed_step(y);", "timed_step"),
    ],
)
def test_a_runtime_call_in_device_code_fails_the_launch_by_name(tmp_path: Path, call: str, name: str) -> None:
    """Device code that really calls a host runtime function (directly, or through a header's host
    helper) builds, and its launch fails with the call's name -- never runs the host's runtime."""
    (tmp_path / "step.h").write_text(
        "#pragma once\n#include <hip/hip_runtime.h>\n"
        "inline void timed_step(float* y) { hipEvent_t e = 0; hipEventRecord(e, 0); y[0] = 2; }\n"
    )
    source = (
        '#include "step.h"\n#include <cstdio>\n'
        f"__global__ void k(float* y) {{ if (threadIdx.x == 3) {{ {call} }} y[threadIdx.x] = 1; }}\n"
    )
    cpu = CpuBackend()
    device = cpu.devices()[0]
    for untrusted in (False, True):
        options = CompileOptions(include_dirs=(str(tmp_path),), untrusted=untrusted)
        prog = cpu.load(cpu.compile(source, "k", options, device), device)
        with pytest.raises(LaunchError) as err:
            prog(cpu.alloc(256), grid=(1,), block=(32,))
        said = "host function" if name == "timed_step" else "host runtime call"
        assert f"the {said} {name} is not available inside a replayed kernel" in str(err.value)
        assert "thread (3,0,0) of block (0,0,0)" in str(err.value)


def test_a_runtime_call_in_a_headers_device_function_is_still_refused(tmp_path: Path) -> None:
    """Only the header's host functions are host code: a __device__ function of it that synchronises
    the device is dynamic parallelism, refused before the build as before."""
    (tmp_path / "dp.h").write_text(
        "#pragma once\ninline void host_sync() { cudaDeviceSynchronize(); }\n"
        "__device__ void wait_children() { cudaDeviceSynchronize(); }\n"
    )
    source = '#include "dp.h"\n__global__ void k(float* y) { wait_children(); y[0] = 1; }\n'
    with pytest.raises(CannotEmulate, match=r"dynamic parallelism .*\(dp\.h line 3\)"):
        CpuBackend().compile(source, "k", CompileOptions(include_dirs=(str(tmp_path),)))


def test_the_host_functions_of_a_header_are_found() -> None:
    from porter.backends.cpu.source import blank_comments_and_strings, host_function_bodies

    text = (
        "inline void a() { x(); }\nstruct T {\n  T() : v(0) { y(); }\n  __device__ int d() { return 1; }\n"
        "  int v;\n};\n__global__ void k() { z(); }\ntemplate <class U> __host__ __device__ U hd(U u) { return u; }\n"
    )
    bodies = host_function_bodies(blank_comments_and_strings(text))
    assert [text[s : e + 1] for s, e in bodies] == ["{ x(); }", "{ y(); }"]


def test_a_headers_void_host_function_bodies_are_left_out_and_the_rest_kept() -> None:
    from porter.backends.cpu.source import inert_host_code

    text = (
        "__global__ void child(int* p) { p[0] = 1; }\n"
        "__global__ void parent(int* p) { child<<<1, 1>>>(p); }\n"
        "constexpr int tile() { return 32; }\n"
        "KERNEL_DEF(scale, float* x) { x[0] *= 2; }\n"
        "static void drive(int* p, int n) {\n"
        "    // a comment with <<< in it\n"
        "    checkCudaErrors(cudaMalloc(&p, n));\n"
        "    child<<<(n + 31) / 32,\n"
        "            32>>>(p);\n"
        "}\n"
        "int count(int n) { child<<<n, 1>>>(0); return helper(n); }\n"
        "struct Timer { Timer() { start_clock(); } void stop() const { stop_clock(); } };\n"
    )
    out = inert_host_code(text)
    assert "child<<<1, 1>>>(p); }" in out  # device code: still a launch (refused as dynamic parallelism)
    assert (
        "constexpr int tile() { return 32; }" in out and "KERNEL_DEF(scale, float* x) { x[0] *= 2; }" in out
    )
    assert 'static void drive(int* p, int n) { porter_emu::host_code_left_out("drive"); \n\n\n\n\n}' in out
    # a value to return: left as written but for its launch's chevrons
    assert "int count(int n) { child/*<<<n, 1>>>*/(0); return helper(n); }" in out
    assert "Timer() { start_clock(); }" in out  # a constructor: run when a static object loads
    assert 'void stop() const { porter_emu::host_code_left_out("stop"); }' in out
    assert "checkCudaErrors" not in out and out.count("\n") == text.count("\n")
