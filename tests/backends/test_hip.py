"""The hip backend: AMD code objects (hipcc, clang-19) and HIP-on-CUDA through NVRTC; runs are gpu-marked."""

from __future__ import annotations

import numpy as np
import pytest
from porter.backends import CompileError, CompileOptions, LaunchError, get_backend
from porter.backends.hip import HIP_ON_CUDA, HipBackend, amd, compile_only_device, header_digest

HIP_SOURCE = r"""
#include <hip/hip_runtime.h>

template <typename T>
__global__ void axpby(int n, T a, const T* x, T b, T* y)
{
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i] + b * y[i];
}

extern "C" __global__ void reduce_sum(const float* in, float* out, int n)
{
    HIP_DYNAMIC_SHARED(float, partial)
    unsigned int t = hipThreadIdx_x;
    float v = 0.0f;
    for (int i = hipBlockIdx_x * hipBlockDim_x + t; i < n; i += hipBlockDim_x * hipGridDim_x) v += in[i];
    for (int offset = warpSize / 2; offset > 0; offset >>= 1) v += __shfl_down(v, offset);
    if (t % warpSize == 0) partial[t / warpSize] = v;
    __syncthreads();
    if (t == 0) {
        float acc = 0.0f;
        for (unsigned int w = 0; w < hipBlockDim_x / warpSize; ++w) acc += partial[w];
        atomicAdd(out, acc);
    }
}

extern "C" __global__ void vote(const int* in, unsigned long long* ballots, int* flags)
{
    int v = in[hipThreadIdx_x];
    unsigned long long b = __ballot(v > 0);
    int any = __any(v < 0), all = __all(v > -100);
    int first = __shfl(v, 0), up = __shfl_up(v, 1), x = __shfl_xor(v, 1);
    if (hipThreadIdx_x % warpSize == 0) ballots[hipThreadIdx_x / warpSize] = b;
    flags[hipThreadIdx_x] = any + 2 * all + 4 * (first == in[(hipThreadIdx_x / warpSize) * warpSize])
        + 8 * (x == in[hipThreadIdx_x ^ 1]) + 16 * (up == in[hipThreadIdx_x > 0 && __lane_id() > 0 ? hipThreadIdx_x - 1 : hipThreadIdx_x]);
}

extern "C" __global__ void histo(const unsigned char* data, unsigned int* hist, int n)
{
    __shared__ unsigned int local[256];
    for (int b = hipThreadIdx_x; b < 256; b += hipBlockDim_x) local[b] = 0;
    __syncthreads();
    for (int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x; i < n; i += hipBlockDim_x * hipGridDim_x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = hipThreadIdx_x; b < 256; b += hipBlockDim_x) atomicAdd(&hist[b], local[b]);
}
"""


@pytest.fixture(scope="module")
def hip() -> HipBackend:
    be = get_backend("hip")
    assert isinstance(be, HipBackend)
    return be


@pytest.mark.integration
def test_devices_is_empty_here_and_never_raises(hip: HipBackend) -> None:
    devices = hip.devices()
    avail = hip.availability()
    assert avail.run == bool(devices)
    for d in devices:
        assert d.backend == "hip" and d.platform in (HIP_ON_CUDA, "rocm")
    if not devices:
        assert avail.hint


def _need(arch: str) -> None:
    if not amd.compilers_for(arch):
        pytest.skip(f"no compiler here reaches {arch} (hipcc / clang-19 + ld.lld + ROCm device libraries)")


@pytest.mark.parametrize(
    ("arch", "compiler"), [("gfx90a", "hipcc"), ("gfx940", "hipcc"), ("gfx942", "clang")]
)
@pytest.mark.integration
def test_amd_code_object_with_resource_report(hip: HipBackend, arch: str, compiler: str) -> None:
    _need(arch)
    binary = hip.compile(HIP_SOURCE, "reduce_sum", CompileOptions(arch=arch))
    assert binary.format == "hsaco" and binary.arch == arch and binary.meta["compiler"] == compiler
    assert binary.data[:4] == b"\x7fELF" and binary.data[18:20] == (224).to_bytes(2, "little")  # EM_AMDGPU
    assert binary.entry == "reduce_sum"
    report = binary.report
    assert report is not None and report.registers is not None and report.registers > 0
    assert report.spill_stores == 0 and report.stack_bytes == 0 and report.shared_bytes == 0
    assert "VGPRs=" in report.raw and "Occupancy" in report.raw
    static = hip.compile(HIP_SOURCE, "histo", CompileOptions(arch=arch))
    assert static.report is not None and static.report.shared_bytes == 1024
    assert arch in binary.toolchain and compiler in binary.toolchain


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.integration
def test_amd_template_entry_is_lowered(hip: HipBackend, arch: str) -> None:
    _need(arch)
    binary = hip.compile(HIP_SOURCE, "axpby<float>", CompileOptions(arch=arch))
    assert binary.entry == "_Z5axpbyIfEviT_PKS0_S0_PS0_"
    assert b"_Z5axpbyIfEviT_PKS0_S0_PS0_" in binary.data


UNICODE_SOURCE = r"""
__global__ void kérnel(float* x) { x[hipThreadIdx_x] *= 2.0f; }
__global__ void sc\u00e4le(float* x) { x[hipThreadIdx_x] *= 3.0f; }
template <typename T> __global__ void tkérnel(T* x) { x[hipThreadIdx_x] += T(1); }
"""


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize(
    ("entry", "symbol"),
    [("kérnel", "_Z7kérnelPf"), ("sc\\u00e4le", "_Z6scälePf"), ("tkérnel<float>", "_Z8tkérnelIfEvPT_")],
)
@pytest.mark.integration
def test_amd_unicode_kernel_names_are_found(hip: HipBackend, arch: str, entry: str, symbol: str) -> None:
    """A Unicode kernel name (as written or as a universal character name) is its UTF-8 symbol, whose
    length the mangling counts in bytes; clang-19's assembly needs the name quoted (gfx942)."""
    _need(arch)
    binary = hip.compile(UNICODE_SOURCE, entry, CompileOptions(arch=arch))
    assert binary.entry == symbol and symbol.encode() in binary.data
    assert binary.report is not None and binary.report.registers


@pytest.mark.integration
def test_amd_compile_error_has_log_and_numbered_source(hip: HipBackend) -> None:
    _need("gfx90a")
    bad = "__global__ void k(float* x)\n{\n    x[0] = hipThreadIdx_x + missing;\n}\n"
    with pytest.raises(CompileError) as info:
        hip.compile(bad, "k", CompileOptions(arch="gfx90a"))
    err = info.value
    assert "missing" in err.log and "kernel.hip:3:" in err.log
    assert err.source == bad and "3 |     x[0] = hipThreadIdx_x + missing;" in str(err)


@pytest.mark.integration
def test_amd_empty_entry_compiles_only_and_a_broken_unit_still_fails(hip: HipBackend) -> None:
    # a unit's compile check where its kernels are templates no launch instantiates: no kernel looked up
    _need("gfx90a")
    only_templates = "template <typename T> __global__ void fill(T* x, T v) { x[hipThreadIdx_x] = v; }\n"
    binary = hip.compile(only_templates, "", CompileOptions(arch="gfx90a"))
    assert binary.entry == "" and binary.data[:4] == b"\x7fELF"
    with pytest.raises(CompileError) as info:
        hip.compile(only_templates + "__device__ int broken = oops;\n", "", CompileOptions(arch="gfx90a"))
    assert "oops" in info.value.log


@pytest.mark.integration
def test_amd_toolchain_ids_differ_per_arch(hip: HipBackend) -> None:
    ids = {arch: hip.toolchain_id(arch=arch) for arch in ("gfx90a", "gfx940", "gfx942", "sm_90")}
    assert len(set(ids.values())) == 4
    assert ids["sm_90"].startswith(f"{HIP_ON_CUDA}-{header_digest()}|")


def test_compile_only_device_facts_are_data() -> None:
    dev = compile_only_device("gfx942")
    assert dev.facts.warp_size == 64 and dev.arch == "gfx942" and dev.backend == "hip"


@pytest.fixture(scope="module")
def on_cuda(hip: HipBackend) -> HipBackend:
    if not hip._cuda.compilers():
        pytest.skip("no NVRTC/nvcc for hip-on-cuda")
    return hip


@pytest.mark.parametrize("entry", ["reduce_sum", "vote", "histo", "axpby<double>"])
@pytest.mark.integration
def test_hip_on_cuda_header_compiles_hip_device_code(on_cuda: HipBackend, entry: str) -> None:
    binary = on_cuda.compile(HIP_SOURCE, entry, CompileOptions(arch="sm_90"))
    assert binary.backend == "hip" and binary.format == "cubin" and binary.meta["platform"] == HIP_ON_CUDA
    assert binary.toolchain.startswith(f"{HIP_ON_CUDA}-") and "|sm_90|" in binary.toolchain
    assert binary.report is not None and binary.report.registers
    assert binary.data[:4] == b"\x7fELF"


@pytest.mark.integration
def test_hip_on_cuda_without_explicit_include_and_with_hip_macros(on_cuda: HipBackend) -> None:
    src = (
        "#if !defined(__HIP_PLATFORM_NVIDIA__) || !defined(__HIPCC__)\n#error not hip-on-cuda\n#endif\n"
        '#include <hip/hip_fp16.h>\nextern "C" __global__ void h(__half* x) { x[hipThreadIdx_x] = __float2half(1.0f); }\n'
    )
    binary = on_cuda.compile(src, "h", CompileOptions(arch="sm_90", output="ptx"))
    assert ".entry h(" in binary.data.decode()


@pytest.mark.integration
def test_hip_on_cuda_cooperative_groups_keep_the_legacy_warp_macros_out_of_cudas_headers(
    on_cuda: HipBackend,
) -> None:
    # the CUDA samples' fastWalshTransform, ported: NVRTC reads cooperative_groups.h (CUDA 13: CCCL, whose
    # `__any(...)` constructor the __any macro rewrote) after hip_runtime.h; the macros still work after it
    src = (
        "#include <hip/hip_runtime.h>\n#include <hip/hip_cooperative_groups.h>\n#include <hip/hip_fp16.h>\n"
        "namespace cg = cooperative_groups;\n"
        'extern "C" __global__ void k(int* x) {\n'
        "    cg::thread_block b = cg::this_thread_block();\n"
        "    int v = __shfl_down(x[b.thread_rank()], 1);\n"
        "    b.sync();\n"
        "    x[b.thread_rank()] = v + __any(v > 3) + __all(v > 0) + (int)(__ballot(v > 1) & 1);\n"
        "}\n"
    )
    for compiler in on_cuda._cuda.compilers():
        binary = on_cuda.compile(src, "k", CompileOptions(arch="sm_90", output="ptx"), compiler=compiler)
        assert ".entry k(" in binary.data.decode() and "vote" in binary.data.decode()


@pytest.mark.integration
def test_hip_on_cuda_error_keeps_user_line_numbers(on_cuda: HipBackend) -> None:
    bad = "__global__ void k(float* x)\n{\n    x[0] = hipBlockDim_x + missing;\n}\n"
    with pytest.raises(CompileError) as info:
        on_cuda.compile(bad, "k", CompileOptions(arch="sm_90"))
    assert "kernel.hip(3)" in info.value.log and info.value.source == bad and info.value.backend == "hip"


@pytest.mark.parametrize("entry", ["kérnel", "sc\\u00e4le"])
@pytest.mark.integration
def test_hip_on_cuda_refuses_a_unicode_kernel_name_in_one_line(on_cuda: HipBackend, entry: str) -> None:
    """nvcc and NVRTC refuse Unicode device names: one line naming the kernel, not their token errors."""
    with pytest.raises(CompileError) as info:
        on_cuda.compile(UNICODE_SOURCE, entry, CompileOptions(arch="sm_90"))
    first = str(info.value).splitlines()[0]
    assert first == (
        f"hip: kernel name {entry!r} is not ASCII: nvcc and NVRTC refuse Unicode names in device "
        "code (rename the kernel to build it for NVIDIA GPUs)"
    )
    assert info.value.backend == "hip" and info.value.source == UNICODE_SOURCE


@pytest.mark.integration
def test_hip_on_cuda_with_nvcc(on_cuda: HipBackend) -> None:
    if "nvcc" not in on_cuda._cuda.compilers():
        pytest.skip("nvcc not installed")
    binary = on_cuda.compile(HIP_SOURCE, "reduce_sum", CompileOptions(arch="sm_90", flags=("compiler=nvcc",)))
    assert binary.meta["compiler"] == "nvcc" and binary.entry == "reduce_sum"


# ----------------------------------------------------------------------------- GPU (NVIDIA: hip-on-cuda)


@pytest.fixture(scope="module")
def nv(on_cuda: HipBackend):
    devices = [d for d in on_cuda.devices() if d.platform == HIP_ON_CUDA]
    if not devices:
        pytest.skip("no NVIDIA GPU visible to CuPy")
    return devices[0]


@pytest.mark.gpu
def test_gpu_hip_on_cuda_reduce_and_timing(on_cuda: HipBackend, nv) -> None:
    rng = np.random.default_rng(3)
    n = 1 << 20
    x = rng.random(n, dtype=np.float32)
    binary = on_cuda.compile(HIP_SOURCE, "reduce_sum", device=nv)
    assert binary.arch == nv.arch
    prog = on_cuda.load(binary, nv)
    out = on_cuda.to_device(np.zeros(1, np.float32), nv)
    block = 256
    prog(
        on_cuda.to_device(x, nv), out, np.int32(n), grid=(120,), block=(block,), shared_bytes=block // 32 * 4
    )
    np.testing.assert_allclose(on_cuda.to_host(out, np.float32, (1,))[0], x.sum(dtype=np.float64), rtol=1e-4)
    on_cuda.flush_cache(nv)
    ms = prog(
        on_cuda.to_device(x, nv), out, np.int32(n), grid=(120,), block=(block,), shared_bytes=32, timed=True
    )
    assert isinstance(ms, float) and ms > 0.0
    on_cuda.synchronize(nv)


@pytest.mark.gpu
def test_gpu_hip_on_cuda_warp_functions(on_cuda: HipBackend, nv) -> None:
    values = np.arange(-3, 61, dtype=np.int32)  # 64 threads = 2 warps of 32 on NVIDIA
    ballots = on_cuda.to_device(np.full(2, 0xDEAD, np.uint64), nv)
    flags = on_cuda.alloc(64 * 4, nv)
    prog = on_cuda.load(on_cuda.compile(HIP_SOURCE, "vote", device=nv), nv)
    prog(on_cuda.to_device(values, nv), ballots, flags, grid=(1,), block=(64,))
    got = on_cuda.to_host(ballots, np.uint64, (2,))
    expected = [sum(1 << lane for lane in range(32) if values[w * 32 + lane] > 0) for w in range(2)]
    assert got.tolist() == expected  # 32-bit ballots, zero-extended to HIP's 64-bit type
    f = on_cuda.to_host(flags, np.int32, (64,))
    assert (f[:32] & 1).all() and not (f[32:] & 1).any()  # __any(v < 0): only warp 0 holds negatives
    assert ((f & 2) == 2).all() and ((f & 4) == 4).all() and ((f & 8) == 8).all() and ((f & 16) == 16).all()


@pytest.mark.gpu
def test_gpu_hip_on_cuda_histogram_and_template(on_cuda: HipBackend, nv) -> None:
    rng = np.random.default_rng(4)
    data = rng.integers(0, 256, 300_001, dtype=np.uint8)
    hist = on_cuda.to_device(np.zeros(256, np.uint32), nv)
    prog = on_cuda.load(on_cuda.compile(HIP_SOURCE, "histo", device=nv), nv)
    prog(on_cuda.to_device(data, nv), hist, np.int32(data.size), grid=(64,), block=(256,))
    np.testing.assert_array_equal(on_cuda.to_host(hist, np.uint32, (256,)), np.bincount(data, minlength=256))
    x, y = rng.standard_normal(1000), rng.standard_normal(1000)
    dy = on_cuda.to_device(y, nv)
    axpby = on_cuda.load(on_cuda.compile(HIP_SOURCE, "axpby<double>", device=nv), nv)
    axpby(
        np.int32(1000),
        np.float64(2.0),
        on_cuda.to_device(x, nv),
        np.float64(0.5),
        dy,
        grid=(4,),
        block=(256,),
    )
    np.testing.assert_allclose(on_cuda.to_host(dy, np.float64, (1000,)), 2.0 * x + 0.5 * y, rtol=1e-12)


@pytest.mark.gpu
def test_gpu_hip_on_cuda_launch_error(on_cuda: HipBackend, nv) -> None:
    prog = on_cuda.load(on_cuda.compile(HIP_SOURCE, "histo", device=nv), nv)
    with pytest.raises(LaunchError):
        prog(on_cuda.alloc(16, nv), on_cuda.alloc(1024, nv), np.int32(16), grid=(1,), block=(2048,))
