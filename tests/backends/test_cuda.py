"""The cuda backend: NVRTC/nvcc compiles here (no GPU needed); CuPy runs are gpu-marked."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest
from porter.backends import Availability, CompileError, CompileOptions, LaunchError, get_backend
from porter.backends.cuda import CudaBackend, ptxas, toolchain

SOURCE = r"""
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>

extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T>
__global__ void axpby(int n, T a, const T* x, T b, T* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b * y[i];
}

template <int BLOCK>
__global__ void block_sum(const float* in, float* partial, int n)
{
    __shared__ float s[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    s[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = s[0] + (float)INT32_MAX * 0.0f + sqrtf(0.0f);
}

extern "C" __global__ void noop(float* out) {}

extern "C" __global__ void big_shared(const float* in, float* out, int n)
{
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 2.0f * buf[n - 1 - i];
}
"""

# Enough live values per thread that ptxas must spill under a 32-register cap.
SPILLY = r"""
extern "C" __global__ void spilly(const float* in, float* out)
{
    float v[64];
    #pragma unroll
    for (int k = 0; k < 64; ++k) v[k] = in[threadIdx.x * 64 + k] * (k + 1);
    float acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < 64; ++k) acc += v[k] * v[63 - k] + v[(k * 7) % 64];
    out[threadIdx.x] = acc;
}
"""


@pytest.fixture(scope="module")
def cuda() -> CudaBackend:
    be = get_backend("cuda")
    assert isinstance(be, CudaBackend)
    if "nvrtc" not in be.compilers():
        pytest.skip("NVRTC not installed (pip install 'porter-gpu[cuda]')")
    return be


@pytest.mark.integration
def test_availability_and_no_devices_without_gpu(cuda: CudaBackend) -> None:
    avail = cuda.availability()
    assert isinstance(avail, Availability)
    assert avail.compile is True
    assert avail.toolchain.startswith("nvrtc-")
    devices = cuda.devices()  # never raises; [] here without an NVIDIA GPU + CuPy
    assert avail.run == bool(devices)
    if not devices:
        assert avail.hint


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    ("entry", "lowered"),
    [
        ("saxpy", "saxpy"),
        ("axpby<float>", "_Z5axpbyIfEviT_PKS0_S0_PS0_"),
        ("block_sum<256>", "_Z9block_sumILi256EEvPKfPfi"),
    ],
)
@pytest.mark.integration
def test_nvrtc_cubin_with_report(cuda: CudaBackend, arch: str, entry: str, lowered: str) -> None:
    binary = cuda.compile(SOURCE, entry, CompileOptions(arch=arch))
    assert binary.format == "cubin" and binary.arch == arch and binary.backend == "cuda"
    assert binary.data[:4] == b"\x7fELF"
    assert binary.entry == lowered
    assert binary.meta["compiler"] == "nvrtc"
    report = binary.report
    assert report is not None and report.registers is not None and report.registers > 0
    assert report.spill_stores == 0 and report.spill_loads == 0 and report.stack_bytes == 0
    assert report.shared_bytes == (1024 if entry.startswith("block_sum") else 0)
    assert lowered in report.raw


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.integration
def test_nvrtc_ptx_has_entry_and_no_report(cuda: CudaBackend, arch: str) -> None:
    binary = cuda.compile(SOURCE, "axpby<double>", CompileOptions(arch=arch, output="ptx"))
    text = binary.data.decode()
    assert binary.format == "ptx"
    assert f".target {arch}" in text
    assert f".entry {binary.entry}(" in text and binary.entry == "_Z5axpbyIdEviT_PKS0_S0_PS0_"
    assert binary.report is None
    asked = cuda.compile(SOURCE, "saxpy", CompileOptions(arch=arch, output="ptx"), report=True)
    assert asked.report is not None and asked.report.registers


@pytest.mark.integration
def test_spills_are_parsed(cuda: CudaBackend) -> None:
    binary = cuda.compile(SPILLY, "spilly", CompileOptions(arch="sm_90", flags=("--maxrregcount=32",)))
    report = binary.report
    assert report is not None and report.registers is not None and report.registers <= 32
    assert report.spill_stores is not None and report.spill_stores > 0
    assert report.spill_loads is not None and report.spill_loads > 0
    assert report.stack_bytes is not None and report.stack_bytes > 0


@pytest.mark.integration
def test_compile_error_carries_log_and_numbered_source(cuda: CudaBackend) -> None:
    bad = 'extern "C" __global__ void k(float* x)\n{\n    x[0] = not_declared;\n}\n'
    with pytest.raises(CompileError) as info:
        cuda.compile(bad, "k", CompileOptions(arch="sm_90"))
    err = info.value
    assert "not_declared" in err.log and "(3)" in err.log
    assert err.source == bad and err.entry == "k"
    assert any(o.startswith("--gpu-architecture=sm_90") for o in err.options)
    assert "3 |     x[0] = not_declared;" in str(err)


@pytest.mark.integration
def test_unknown_template_entry_is_a_compile_error(cuda: CudaBackend) -> None:
    with pytest.raises(CompileError):
        cuda.compile(SOURCE, "no_such_kernel<int>", CompileOptions(arch="sm_90"))


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.integration
def test_an_empty_entry_compiles_only_and_looks_up_no_kernel(cuda: CudaBackend, compiler: str) -> None:
    # a compile check of a unit whose kernels are templates no launch instantiates
    if compiler not in cuda.compilers():
        pytest.skip(f"{compiler} not installed")
    only_templates = "template <typename T> __global__ void fill(T* x, T v) { x[threadIdx.x] = v; }\n"
    binary = cuda.compile(only_templates, "", CompileOptions(arch="sm_90"), compiler=compiler)
    assert binary.entry == "" and binary.data
    with pytest.raises(CompileError) as info:
        cuda.compile(
            only_templates + "__device__ int broken = oops;\n",
            "",
            CompileOptions(arch="sm_90"),
            compiler=compiler,
        )
    assert "oops" in info.value.log


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("entry", ["kérnel", "sc\\u00e4le"])
@pytest.mark.integration
def test_a_unicode_kernel_name_is_refused_in_one_line(cuda: CudaBackend, compiler: str, entry: str) -> None:
    # nvcc: "Universal character is not allowed in device entity name"; NVRTC: "unrecognized token"
    if compiler not in cuda.compilers():
        pytest.skip(f"{compiler} not installed")
    src = "__global__ void kérnel(float* x) { x[0] = 1.0f; }\n__global__ void sc\\u00e4le(float* x) { x[0] = 2.0f; }\n"
    with pytest.raises(CompileError) as info:
        cuda.compile(src, entry, CompileOptions(arch="sm_90"), compiler=compiler)
    assert str(info.value).splitlines()[0] == (
        f"cuda: kernel name {entry!r} is not ASCII: nvcc and NVRTC refuse Unicode names in device code "
        "(rename the kernel to build it for NVIDIA GPUs)"
    )


@pytest.mark.integration
def test_toolchain_id_differs_per_arch_and_names_compiler(cuda: CudaBackend) -> None:
    ids = {arch: cuda.toolchain_id(arch=arch) for arch in ("sm_80", "sm_90", "sm_90a")}
    assert len(set(ids.values())) == 3
    assert ids["sm_90"] == f"nvrtc-{toolchain.nvrtc_version()}|sm_90|driver-{cuda._driver()}"
    binary = cuda.compile(SOURCE, "saxpy", CompileOptions(arch="sm_80"))
    assert binary.toolchain == ids["sm_80"]


@pytest.mark.integration
def test_defines_and_include_dirs(cuda: CudaBackend, tmp_path) -> None:
    (tmp_path / "scale.h").write_text("#define SCALE_BY(x) ((x) * FACTOR)\n")
    src = '#include "scale.h"\nextern "C" __global__ void s(float* x) { x[threadIdx.x] = SCALE_BY(x[threadIdx.x]); }\n'
    binary = cuda.compile(
        src, "s", CompileOptions(arch="sm_90", defines=("FACTOR=3.0f",), include_dirs=(str(tmp_path),))
    )
    assert binary.entry == "s"
    with pytest.raises(CompileError):
        cuda.compile(src, "s", CompileOptions(arch="sm_90", defines=("FACTOR=3.0f",)))


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.integration
def test_a_unit_that_includes_a_file_named_kernel_cu_builds(
    cuda: CudaBackend, compiler: str, tmp_path
) -> None:
    # Rodinia's bfs: bfs.cu includes "kernel.cu" and "kernel2.cu".  A source compiled under the name
    # kernel.cu included itself ("class Node has already been defined", "#include file includes itself").
    if compiler not in cuda.compilers():
        pytest.skip(f"{compiler} not installed")
    (tmp_path / "kernel.cu").write_text(
        "__global__ void Kernel(Node* nodes, int n) { int i = threadIdx.x; if (i < n) nodes[i].edges += 1; }\n"
    )
    unit = '#include <cstdio>\nstruct Node { int start; int edges; };\n#include "kernel.cu"\n'
    options = CompileOptions(arch="sm_90", include_dirs=(str(tmp_path),), flags=(f"compiler={compiler}",))
    binary = cuda.compile(unit, "Kernel", options)
    assert binary.meta["compiler"] == compiler and binary.data[:4] == b"\x7fELF"


@pytest.mark.integration
def test_a_compile_error_names_the_compilers_first_error_in_its_first_line(cuda: CudaBackend) -> None:
    # what a report row keeps of a kernel that does not build: the compiler's own words, not only its options
    with pytest.raises(CompileError) as info:
        cuda.compile("__global__ void k(float* x) { x[0] = oops; }", "k", CompileOptions(arch="sm_90"))
    first = str(info.value).splitlines()[0]
    assert first.startswith("cuda: compile of k failed: ") and '"oops"' in first and "(options: " in first


@pytest.mark.integration
def test_nvcc_path(cuda: CudaBackend) -> None:
    if "nvcc" not in cuda.compilers():
        pytest.skip("nvcc not installed")
    for entry, lowered in [("saxpy", "saxpy"), ("block_sum<256>", "_Z9block_sumILi256EEvPKfPfi")]:
        binary = cuda.compile(SOURCE, entry, CompileOptions(arch="sm_90", flags=("compiler=nvcc",)))
        assert binary.meta["compiler"] == "nvcc" and binary.toolchain.startswith("nvcc-")
        assert binary.entry == lowered and binary.data[:4] == b"\x7fELF"
        assert binary.report is not None and binary.report.registers
        assert "compiler=nvcc" not in binary.meta["options"]
    ptx = cuda.compile(SOURCE, "axpby<float>", CompileOptions(arch="sm_80", output="ptx"), compiler="nvcc")
    assert ".entry _Z5axpbyIfEviT_PKS0_S0_PS0_(" in ptx.data.decode()
    with pytest.raises(CompileError) as info:
        cuda.compile("__global__ void k(float* x) { x[0] = oops; }", "k", CompileOptions(), compiler="nvcc")
    assert "oops" in info.value.log


@pytest.mark.integration
def test_a_kernel_file_that_includes_host_headers_is_built_by_nvcc(cuda: CudaBackend) -> None:
    # a real program's kernel file (the CUDA samples' matrixMul) includes <fstream> through its helpers
    # and the profiler API: NVRTC cannot open them, nvcc's host compiler can
    if not {"nvrtc", "nvcc"} <= set(cuda.compilers()):
        pytest.skip("needs NVRTC and nvcc")
    src = (
        "#include <fstream>\n#include <cuda_profiler_api.h>\n"
        "template <int B> __global__ void k(float* x) { x[threadIdx.x] *= B; }\n"
    )
    binary = cuda.compile(src, "k<4>", CompileOptions(arch="sm_90"))
    assert binary.meta["compiler"] == "nvcc" and binary.entry == "_Z1kILi4EEvPf"
    with pytest.raises(CompileError):  # a compiler asked for is the one used
        cuda.compile(src, "k<4>", CompileOptions(arch="sm_90"), compiler="nvrtc")
    with pytest.raises(CompileError):  # and another error is NVRTC's to report
        cuda.compile("__global__ void k(float* x) { x[0] = oops; }", "k", CompileOptions(arch="sm_90"))


def test_ptxas_parser_on_a_multi_kernel_log() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
        "ptxas info    : Function properties for a\n"
        "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n"
        "ptxas info    : Function properties for helper\n"
        "    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
        "ptxas info    : Function properties for b\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 7 registers, used 0 barriers\n"
    )
    assert ptxas.entries(log) == ["a", "b"]
    a = ptxas.parse_report(log, "a")
    assert a is not None and (a.registers, a.shared_bytes, a.spill_stores, a.spill_loads, a.stack_bytes) == (
        40,
        2048,
        12,
        16,
        8,
    )
    b = ptxas.parse_report(log, "b")
    assert b is not None and (b.registers, b.shared_bytes, b.stack_bytes) == (7, 0, 0)
    assert ptxas.parse_report("no report here") is None


@pytest.mark.integration
def test_runtime_calls_without_gpu_fail_as_data_not_crashes(cuda: CudaBackend) -> None:
    if cuda.devices():
        pytest.skip("a GPU is present")
    binary = cuda.compile(SOURCE, "saxpy", CompileOptions(arch="sm_90"))
    from porter.backends import Device

    fake = Device(backend="cuda", name="none", arch="sm_90", kind="gpu")
    with pytest.raises(LaunchError):
        cuda.load(binary, fake)


def test_a_process_told_to_spin_leaves_the_cuda_default_and_one_without_a_driver_says_why(
    monkeypatch,
) -> None:
    from porter.backends.cuda import cupy_runtime

    monkeypatch.setenv(cupy_runtime.SPIN_ENV, "1")
    cupy_runtime.wait_mode.cache_clear()
    try:
        assert cupy_runtime.wait_mode(0) == f"spin ({cupy_runtime.SPIN_ENV}=1)"
        monkeypatch.delenv(cupy_runtime.SPIN_ENV)
        cupy_runtime.wait_mode.cache_clear()
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            assert cupy_runtime.wait_mode(0).startswith("spin (the driver library: ")
        else:
            assert cupy_runtime.wait_mode(0) in ("blocking", "spin (CUDA driver error 100)")  # 100: no device
    finally:
        cupy_runtime.wait_mode.cache_clear()


# ----------------------------------------------------------------------------- GPU


@pytest.fixture(scope="module")
def gpu(cuda: CudaBackend):
    devices = cuda.devices()
    if not devices:
        pytest.skip("no NVIDIA GPU visible to CuPy")
    return devices[0]


@pytest.mark.gpu
def test_gpu_device_facts(cuda: CudaBackend, gpu) -> None:
    assert gpu.arch.startswith("sm_") and gpu.kind == "gpu" and gpu.driver
    assert gpu.facts.warp_size == 32 and gpu.facts.max_threads_per_block >= 1024
    assert gpu.facts.shared_mem_per_block >= 48 * 1024 and (gpu.facts.multiprocessors or 0) > 0
    assert cuda.availability().run is True
    assert cuda.toolchain_id(gpu).endswith(f"|{gpu.arch}|driver-{gpu.driver}")


@pytest.mark.gpu
@pytest.mark.parametrize("output", ["cubin", "ptx"])
def test_gpu_saxpy_matches_numpy_and_times(cuda: CudaBackend, gpu, output: str) -> None:
    if output == "ptx":
        driver = tuple(int(p) for p in gpu.driver.split("."))
        if driver < tuple(int(p) for p in (toolchain.nvrtc_version() or "0.0").split(".")):
            pytest.skip(f"driver {gpu.driver} cannot JIT PTX from NVRTC {toolchain.nvrtc_version()}")
    rng = np.random.default_rng(1)
    n = 100_003
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    prog = cuda.load(cuda.compile(SOURCE, "saxpy", CompileOptions(output=output), gpu), gpu)
    dx, dy = cuda.to_device(x, gpu), cuda.to_device(y, gpu)
    grid = ((n + 255) // 256,)
    assert prog(np.int32(n), np.float32(2.5), dx, dy, grid=grid, block=(256,)) is None
    out = cuda.to_host(dy, np.float32, (n,))
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-6, atol=1e-6)
    cuda.flush_cache(gpu)
    ms = prog(np.int32(n), np.float32(2.5), dx, dy, grid=grid, block=(256,), timed=True)
    assert isinstance(ms, float) and ms > 0.0
    cuda.synchronize(gpu)


@pytest.mark.gpu
def test_a_gpu_context_porter_uses_blocks_while_waiting_and_still_times_on_the_gpu(
    cuda: CudaBackend, gpu
) -> None:
    """porter's children wait for the GPU without spinning a core (CU_CTX_SCHED_BLOCKING_SYNC on the
    primary context CuPy uses), and a timed launch is still measured by events."""
    from porter.backends.cuda import cupy_runtime

    if os.environ.get(cupy_runtime.SPIN_ENV) == "1":
        pytest.skip(f"{cupy_runtime.SPIN_ENV}=1 asks for the driver's default")
    n = 1 << 20
    prog = cuda.load(cuda.compile(SOURCE, "saxpy", device=gpu), gpu)
    dx = cuda.to_device(np.ones(n, np.float32), gpu)
    dy = cuda.to_device(np.ones(n, np.float32), gpu)
    ms = prog(np.int32(n), np.float32(2.0), dx, dy, grid=(n // 256,), block=(256,), timed=True)
    assert isinstance(ms, float) and ms > 0.0
    assert cupy_runtime.wait_mode(gpu.index) == "blocking"
    lib = ctypes.CDLL("libcuda.so.1")
    handle, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    assert lib.cuDeviceGet(ctypes.byref(handle), gpu.index) == 0
    assert lib.cuDevicePrimaryCtxGetState(handle, ctypes.byref(flags), ctypes.byref(active)) == 0
    assert active.value == 1 and flags.value & 0x07 == cupy_runtime.CU_CTX_SCHED_BLOCKING_SYNC


@pytest.mark.gpu
def test_gpu_template_kernels(cuda: CudaBackend, gpu) -> None:
    rng = np.random.default_rng(2)
    n = 5000
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    prog = cuda.load(cuda.compile(SOURCE, "axpby<double>", device=gpu), gpu)
    dy = cuda.to_device(y, gpu)
    prog(np.int32(n), np.float64(3.0), cuda.to_device(x, gpu), np.float64(-0.5), dy, grid=(20,), block=(256,))
    np.testing.assert_allclose(cuda.to_host(dy, np.float64, (n,)), 3.0 * x - 0.5 * y, rtol=1e-12)
    data = rng.standard_normal(n).astype(np.float32)
    blocks = (n + 255) // 256
    sums = cuda.load(cuda.compile(SOURCE, "block_sum<256>", device=gpu), gpu)
    partial = cuda.alloc(blocks * 4, gpu)
    sums(cuda.to_device(data, gpu), partial, np.int32(n), grid=(blocks,), block=(256,))
    padded = np.concatenate([data, np.zeros(blocks * 256 - n, np.float32)])
    expected = padded.reshape(blocks, 256).sum(axis=1)
    np.testing.assert_allclose(cuda.to_host(partial, np.float32, (blocks,)), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_poisoned_output_stays_poisoned(cuda: CudaBackend, gpu) -> None:
    """A kernel that writes nothing leaves the poison in place: the harness can tell it did nothing."""
    poison = np.full(64, np.nan, dtype=np.float32)
    out = cuda.to_device(poison, gpu)
    prog = cuda.load(cuda.compile(SOURCE, "noop", device=gpu), gpu)
    prog(out, grid=(1,), block=(64,))
    assert np.isnan(cuda.to_host(out, np.float32, (64,))).all()


@pytest.mark.gpu
def test_gpu_dynamic_shared_above_48k(cuda: CudaBackend, gpu) -> None:
    n = 20_000  # 80 000 bytes of dynamic shared memory: needs the opt-in attribute
    x = np.arange(n, dtype=np.float32)
    prog = cuda.load(cuda.compile(SOURCE, "big_shared", device=gpu), gpu)
    out = cuda.alloc(n * 4, gpu)
    prog(cuda.to_device(x, gpu), out, np.int32(n), grid=(1,), block=(256,), shared_bytes=n * 4)
    np.testing.assert_array_equal(cuda.to_host(out, np.float32, (n,)), 2.0 * x[::-1])


@pytest.mark.gpu
def test_gpu_bad_launch_is_a_launch_error(cuda: CudaBackend, gpu) -> None:
    prog = cuda.load(cuda.compile(SOURCE, "noop", device=gpu), gpu)
    out = cuda.alloc(4, gpu)
    with pytest.raises(LaunchError):
        prog(out, grid=(1,), block=(4096,))  # more threads than any block may have
    with pytest.raises(LaunchError):
        prog(out, 7, grid=(1,), block=(1,))  # a Python int has no C type
