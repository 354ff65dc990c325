"""The OpenCL backend on a real CPU OpenCL device (PoCL): probing, compile, load, launch, memory."""

from __future__ import annotations

import numpy as np
import pytest
from porter.backends import (
    Binary,
    CompileError,
    CompileOptions,
    Device,
    LaunchError,
    Program,
    ToolchainMissing,
    get_backend,
)
from porter.backends.isolate import LocalBuffer

pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install 'porter-gpu[opencl]')")

POCL = "Portable Computing Language"

SAXPY = """
__kernel void saxpy(__global float *y, __global const float *x, const float a, const int n) {
    int i = (int)get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

REDUCE = """
__kernel void block_sum(__global const float *x, __global float *partial, __local float *scratch, const int n) {
    int lid = (int)get_local_id(0);
    int gid = (int)get_global_id(0);
    scratch[lid] = gid < n ? x[gid] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = (int)get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = scratch[0];
}
"""

TRANSPOSE = """
__kernel void transpose(__global const float *in, __global float *out, const int rows, const int cols) {
    int c = (int)get_global_id(0);
    int r = (int)get_global_id(1);
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
"""

ATOMICS = """
__kernel void histogram(__global const int *values, __global int *bins, __global int *count, const int n) {
    int i = (int)get_global_id(0);
    if (i < n) {
        atomic_add(&bins[values[i]], 1);
        atomic_inc(count);
    }
}
"""

SCALARS = """
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void affine(__global double *out, __global float *out_f, const double a, const float b,
                     const long offset, const uint n) {
    uint i = (uint)get_global_id(0);
    if (i < n) {
        out[i] = a * (double)(i + offset) + (double)b;
        out_f[i] = b * (float)i;
    }
}
"""

BROKEN = """
__kernel void broken(__global float *y) {
    int i = get_global_id(0);
    y[i] = undefined_name + 1.0f;
}
"""


@pytest.fixture(scope="module")
def backend():
    return get_backend("opencl")


@pytest.fixture(scope="module")
def device(backend) -> Device:
    for d in backend.devices():
        if d.platform == POCL and d.kind == "cpu":
            return d
    pytest.skip("no PoCL CPU device (apt-get install pocl-opencl-icd)")


def build(backend, device: Device, source: str, entry: str, options: CompileOptions | None = None) -> Program:
    return backend.load(backend.compile(source, entry, options or CompileOptions(), device), device)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.integration
def test_probe_finds_pocl_cpu_device(backend, device):
    assert device.backend == "opencl"
    assert device.arch.startswith("opencl-") and device.arch.endswith("/cpu")
    assert device.driver
    facts = device.facts
    assert facts.warp_size >= 1
    assert facts.max_threads_per_block >= 64
    assert facts.shared_mem_per_block >= 16 * 1024
    assert facts.multiprocessors and facts.multiprocessors >= 1
    # the probe is cached: a second call lists the same devices
    assert backend.devices() == backend.devices()
    avail = backend.availability()
    assert avail.compile and avail.run
    assert device in avail.devices
    assert avail.toolchain


def test_dialect_is_data(backend):
    dialect = backend.dialect
    assert dialect.qualifiers["local"] == "__local"
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in dialect.sync["barrier"]


@pytest.mark.integration
def test_saxpy(backend, device):
    n = 1000
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    prog = build(backend, device, SAXPY, "saxpy")
    d_x, d_y = backend.to_device(x, device), backend.to_device(y, device)
    assert prog(d_y, d_x, np.float32(2.5), np.int32(n), grid=(ceil_div(n, 64),), block=(64,)) is None
    backend.synchronize(device)
    np.testing.assert_allclose(
        backend.to_host(d_y, np.float32, (n,)), 2.5 * x + y, rtol=1e-5, atol=1e-6
    )  # fma may fuse


@pytest.mark.integration
def test_binary_is_device_code_and_reloads(backend, device):
    binary = backend.compile(SAXPY, "saxpy", CompileOptions(), device)
    assert isinstance(binary, Binary)
    assert binary.backend == "opencl" and binary.entry == "saxpy" and binary.arch == device.arch
    assert binary.format in ("opencl-binary", "opencl-source") and binary.data
    assert binary.toolchain == backend.toolchain_id(device)
    # a second load of the same binary gives an independent, working program
    n = 10
    x = np.arange(n, dtype=np.float32)
    for _ in range(2):
        prog = backend.load(binary, device)
        d_y = backend.to_device(np.zeros(n, np.float32), device)
        prog(d_y, backend.to_device(x, device), np.float32(3), np.int32(n), grid=(1,), block=(16,))
        np.testing.assert_array_equal(backend.to_host(d_y, np.float32, (n,)), 3 * x)


@pytest.mark.integration
def test_local_memory_reduction(backend, device):
    n, block = 5000, 128
    groups = ceil_div(n, block)
    x = np.random.default_rng(2).uniform(-1, 1, n).astype(np.float32)
    prog = build(backend, device, REDUCE, "block_sum")
    d_x = backend.to_device(x, device)
    d_partial = backend.alloc(groups * 4, device)
    prog(d_x, d_partial, LocalBuffer(block * 4), np.int32(n), grid=(groups,), block=(block,))
    partial = backend.to_host(d_partial, np.float32, (groups,))
    expect = np.pad(x, (0, groups * block - n)).reshape(groups, block).sum(axis=1, dtype=np.float64)
    np.testing.assert_allclose(partial, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.integration
def test_2d_launch(backend, device):
    rows, cols = 19, 37
    a = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    prog = build(backend, device, TRANSPOSE, "transpose")
    d_in = backend.to_device(a, device)
    d_out = backend.to_device(np.full((cols, rows), -1, np.float32), device)
    block = (8, 4)
    grid = (ceil_div(cols, block[0]), ceil_div(rows, block[1]))
    prog(d_in, d_out, np.int32(rows), np.int32(cols), grid=grid, block=block)
    np.testing.assert_array_equal(backend.to_host(d_out, np.float32, (cols, rows)), a.T)


@pytest.mark.integration
def test_integer_atomics(backend, device):
    n, nbins = 4096, 16
    values = np.random.default_rng(3).integers(0, nbins, n).astype(np.int32)
    prog = build(backend, device, ATOMICS, "histogram")
    d_values = backend.to_device(values, device)
    d_bins = backend.to_device(np.zeros(nbins, np.int32), device)
    d_count = backend.to_device(np.zeros(1, np.int32), device)
    prog(d_values, d_bins, d_count, np.int32(n), grid=(ceil_div(n, 256),), block=(256,))
    np.testing.assert_array_equal(
        backend.to_host(d_bins, np.int32, (nbins,)), np.bincount(values, minlength=nbins)
    )
    assert backend.to_host(d_count, np.int32, (1,))[0] == n


@pytest.mark.integration
def test_float_double_and_integer_scalars(backend, device):
    n = 100
    prog = build(backend, device, SCALARS, "affine")
    d_out = backend.alloc(n * 8, device)
    d_out_f = backend.alloc(n * 4, device)
    a, b, offset = 1.0 + 2.0**-40, 0.75, 3
    prog(
        d_out,
        d_out_f,
        np.float64(a),
        np.float32(b),
        np.int64(offset),
        np.uint32(n),
        grid=(ceil_div(n, 32),),
        block=(32,),
    )
    i = np.arange(n, dtype=np.float64)
    # 2**-40 survives only if the double scalar arrived as a double
    np.testing.assert_array_equal(backend.to_host(d_out, np.float64, (n,)), a * (i + offset) + b)
    np.testing.assert_array_equal(
        backend.to_host(d_out_f, np.float32, (n,)), (np.float32(b) * i).astype(np.float32)
    )


@pytest.mark.integration
def test_defines_reach_the_compiler(backend, device):
    source = "__kernel void fill(__global int *y) { y[get_global_id(0)] = VALUE * SCALE; }"
    prog = build(backend, device, source, "fill", CompileOptions(defines=("VALUE=6", "SCALE=7")))
    d_y = backend.alloc(4 * 4, device)
    prog(d_y, grid=(1,), block=(4,))
    np.testing.assert_array_equal(backend.to_host(d_y, np.int32, (4,)), [42] * 4)


@pytest.mark.integration
def test_timed_launch_returns_device_milliseconds(backend, device):
    n = 1 << 16
    prog = build(backend, device, SAXPY, "saxpy")
    d_x = backend.to_device(np.ones(n, np.float32), device)
    d_y = backend.to_device(np.zeros(n, np.float32), device)
    backend.flush_cache(device)
    ms = prog(d_y, d_x, np.float32(1), np.int32(n), grid=(n // 256,), block=(256,), timed=True)
    assert isinstance(ms, float) and ms > 0
    backend.flush_cache(device)
    np.testing.assert_array_equal(backend.to_host(d_y, np.float32, (n,)), np.ones(n, np.float32))


@pytest.mark.integration
def test_compile_error_carries_log_and_numbered_source(backend, device):
    with pytest.raises(CompileError) as info:
        backend.compile(BROKEN, "broken", CompileOptions(defines=("X=1",)), device)
    err = info.value
    assert err.backend == "opencl" and err.entry == "broken"
    assert "undefined_name" in err.log
    assert "-DX=1" in err.options
    text = str(err)
    assert "4 |     y[i] = undefined_name + 1.0f;" in text


@pytest.mark.integration
def test_missing_entry_is_a_compile_error(backend, device):
    with pytest.raises(CompileError) as info:
        backend.compile(SAXPY, "no_such_kernel", CompileOptions(), device)
    assert "saxpy" in info.value.log


@pytest.mark.integration
def test_unicode_kernel_names_as_written_and_as_universal_character_names(backend, device):
    # C99 (so OpenCL C) takes Unicode identifiers; `sc\u00e4le` is the kernel the program lists as scäle
    src = (
        "__kernel void k\u00e9rnel(__global float *y) { y[get_global_id(0)] += 1.0f; }\n"
        "__kernel void sc\\u00e4le(__global float *y) { y[get_global_id(0)] *= 3.0f; }\n"
    )
    y = np.ones(4, np.float32)
    buf = backend.to_device(y, device)
    for entry in ("k\u00e9rnel", "sc\\u00e4le"):
        prog = build(backend, device, src, entry)
        prog(buf, grid=(1,), block=(4,))
    backend.synchronize(device)
    assert backend.to_host(buf, np.float32, (4,)).tolist() == [6.0] * 4


@pytest.mark.integration
def test_compile_without_device_uses_first_working_device(backend, device):
    binary = backend.compile(SAXPY, "saxpy")
    first = next(d for d in backend.devices() if d.kind != "checker")
    assert binary.arch == first.arch
    assert binary.toolchain == backend.toolchain_id(None) == backend.toolchain_id(first)


@pytest.mark.integration
def test_toolchain_id_is_stable_and_names_the_device(backend, device):
    tid = backend.toolchain_id(device)
    assert tid == backend.toolchain_id(device)
    assert device.name in tid and device.platform in tid and device.driver in tid
    assert "OpenCL C" in tid


@pytest.mark.integration
def test_launch_errors_are_launch_errors(backend, device):
    prog = build(backend, device, SAXPY, "saxpy")
    d_x = backend.to_device(np.ones(8, np.float32), device)
    with pytest.raises(LaunchError, match="NumPy scalar"):
        prog(d_x, d_x, 2.0, np.int32(8), grid=(1,), block=(8,))
    with pytest.raises(LaunchError, match="to_device"):
        prog(np.ones(8, np.float32), d_x, np.float32(2), np.int32(8), grid=(1,), block=(8,))
    with pytest.raises(LaunchError, match="takes 4 arguments, 2 given"):
        prog(d_x, d_x, grid=(1,), block=(8,))
    too_big = device.facts.max_threads_per_block * 2
    with pytest.raises(LaunchError, match="launch"):
        prog(d_x, d_x, np.float32(2), np.int32(8), grid=(1,), block=(too_big,))


@pytest.mark.integration
def test_memory_round_trips(backend, device):
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]  # not contiguous
    buf = backend.to_device(a, device)
    np.testing.assert_array_equal(backend.to_host(buf, np.int16, (4, 3)), a)
    empty = backend.to_device(np.zeros(0, np.float32), device)
    assert backend.to_host(empty, np.float32, (0,)).shape == (0,)
    with pytest.raises(LaunchError):
        backend.to_host(buf, np.float64, (100,))


@pytest.mark.integration
def test_checker_device_needs_the_oclgrind_wrapper(backend):
    checker = [d for d in backend.devices() if d.kind == "checker"]
    if not checker:
        pytest.skip("oclgrind is not installed (apt-get install oclgrind)")
    (dev,) = checker
    assert dev.name == "oclgrind" and dev.platform == "Oclgrind" and dev.arch.endswith("/checker")
    assert dev.driver.startswith("Oclgrind ")
    assert backend.toolchain_id(dev) == backend.toolchain_id(dev) and dev.driver in backend.toolchain_id(dev)
    with pytest.raises(ToolchainMissing, match="oclgrind_wrapper"):
        backend.compile(SAXPY, "saxpy", CompileOptions(), dev)


@pytest.mark.integration
def test_job_through_the_isolation_layer(backend, device):
    """The harness's path: compile, two runs on fresh buffers and timed launches in a child process."""
    from porter.backends.isolate import Job, TimingPlan, run_job

    n = 300
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    job = Job(
        backend="opencl",
        source=SAXPY,
        entry="saxpy",
        device=device,
        args=(y, x, np.float32(2), np.int32(n)),
        grid=(ceil_div(n, 64),),
        block=(64,),
        runs=2,
        read_back=(0,),
        timing=TimingPlan(warmup=1, repeats=3, rotate=2),
        use_cache=False,
    )
    result = run_job(job, timeout_s=300)
    assert result.ok, (result.stage, result.error, result.log)
    assert result.toolchain == backend.toolchain_id(device)
    assert len(result.outputs) == 2
    for (out,) in result.outputs:  # each run starts from fresh copies of the inputs
        np.testing.assert_array_equal(out, 2 * x + y)
    assert len(result.times_ms) == 3 and all(t > 0 for t in result.times_ms)


CHILD = """
import pickle, sys
import numpy as np
from porter.backends import CompileOptions, get_backend
from porter.backends.opencl import devices

device = pickle.loads(bytes.fromhex(sys.argv[1]))
backend = get_backend("opencl")
backend.adopt(device)
assert devices.live(device) is not None
prog = backend.load(backend.compile(sys.argv[2], "saxpy", CompileOptions(), device), device)
x = np.arange(100, dtype=np.float32)
y = backend.to_device(np.ones(100, np.float32), device)
prog(y, backend.to_device(x, device), np.float32(2), np.int32(100), grid=(2,), block=(64,), shared_bytes=0)
backend.synchronize(device)
out = backend.to_host(y, np.float32, (100,))
assert np.array_equal(out, 2 * x + 1), out
print("probed", devices.inventory.cache_info().currsize)
"""


def test_a_jobs_child_takes_its_device_as_the_parent_probed_it(backend, device):
    """A child adopts the device of its job: it compiles, launches and reads back there without
    discovering and probing every device again (each probe builds kernels from source, and a child's
    runtime caches start empty)."""
    import pickle
    import subprocess
    import sys

    run = [sys.executable, "-c", CHILD, pickle.dumps(device).hex(), SAXPY]
    out = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["probed", "0"]  # no inventory was made in that process
    missing = Device(**{**device.__dict__, "name": "no such device"})
    from porter.backends.opencl import devices

    backend.adopt(missing)  # nothing to adopt: found (or not) as in any process
    assert devices.live(missing) is None


def test_kernel_builds_may_contract_multiply_adds_as_cuda_does() -> None:
    """nvcc and NVRTC contract a * b + c into an FMA by default (--fmad=true); so may the OpenCL build
    of a kernel (as porter_opencl.h builds a program's .cl); a debug build contracts nothing."""
    from porter.backends.opencl import build_options

    assert "-cl-mad-enable" in build_options(CompileOptions(defines=("N=4",)))
    assert build_options(CompileOptions(defines=("N=4",)))[0] == "-DN=4"
    debug = build_options(CompileOptions(debug=True))
    assert "-cl-opt-disable" in debug and "-cl-mad-enable" not in debug
