"""CUDA's full-warp shuffle down through porter_shuffle_down ([warp_helpers] of cuda2opencl.toml: Intel's
intel_sub_group_shuffle_down where cl_intel_subgroups is defined, khr's elsewhere), the sub-group probe that
runs that very helper, and the general-shuffle probe whose failure leaves kernels needing sub-group shuffles
out of a device's builds (-DPORTER_NO_SUBGROUP_SHUFFLE).  Issues #29/#30: Intel's CPU runtime compiles khr's
sub_group_shuffle_down (and its xor/indexed shuffles) wrongly in 32-wide sub-groups in some shapes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opencl_launch import launch_translated
from porter.backends.opencl.requirements import ptx_subgroups_source
from porter.backends.opencl.translate import tables, translate_to_opencl

from porter.model import TranslatedKernel, Translation

FULL = "0xffffffffu"
SOURCE = f"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ int warp_total(int v) {{
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync({FULL}, v, offset);
    return v;
}}

// each 32-thread warp sums its values; lane 0 stores (the shape Intel's runtime got wrong with khr's shuffle)
__global__ void warp_sums(const int* in, int* out) {{
    int v = warp_total(in[blockIdx.x * blockDim.x + threadIdx.x]);
    if (threadIdx.x % 32 == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}}

// one sum per block (of at most 32 threads)
__global__ void block_sums(const int* in, int* out) {{
    int v = warp_total(in[blockIdx.x * blockDim.x + threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}}

__global__ void float_sums(const float* in, float* out) {{
    float v = in[blockIdx.x * 32 + threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down(v, offset, 32);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}}

__global__ void tile_sums(const int* in, int* out) {{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    int v = in[blockIdx.x * 32 + threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v += tile.shfl_down(v, offset);
    if (tile.thread_rank() == 0) out[blockIdx.x] = v;
}}

// the value argument has a side effect: it must happen once
__global__ void once(int* counts) {{
    int i = 0;
    int got = __shfl_down_sync({FULL}, i++, 1);
    counts[blockIdx.x * 32 + threadIdx.x] = i * 100 + (got == 0);
}}
"""


def _kernel(tr: Translation, entry: str) -> TranslatedKernel:
    return next(k for k in tr.kernels if k.entry == entry)


def _translation() -> Translation:
    tr = translate_to_opencl(SOURCE, "shuffles.cu")
    for k in tr.kernels:
        assert not k.untranslatable, (k.name, k.untranslatable)
    return tr


def _helper() -> str:
    return str(tables()["warp_helpers"]["porter_shuffle_down"]["source"]).strip("\n")


def test_a_full_warp_shuffle_down_is_the_helper_emitted_once() -> None:
    tr = _translation()
    text = tr.text
    # every form goes through the helper (porter's own sub-groups define the khr function, for NVIDIA's OpenCL)
    assert "sub_group_shuffle_down" not in text.replace(_helper(), "").replace(ptx_subgroups_source(), "")
    # __shfl_down_sync, __shfl_down with a width of 32 and tile.shfl_down
    assert text.count("porter_shuffle_down(v, (uint)(offset))") == 3
    assert "v += porter_shuffle_down(v, (uint)(offset));" in text  # __shfl_down_sync and tile.shfl_down
    assert "porter_shuffle_down(i++, (uint)(1))" in text  # the argument written once
    assert text.count(_helper()) == 1
    assert text.index(_helper()) < text.index("int warp_total(")
    # Intel's own function (each value evaluated once: a function per type), khr's elsewhere
    assert "intel_sub_group_shuffle_down(v, v, d)" in _helper()
    assert "#define porter_shuffle_down(v, d) sub_group_shuffle_down((v), (d))" in _helper()
    for entry in ("warp_sums", "block_sums", "float_sums", "tile_sums", "once"):
        assert "subgroup_shuffle_relative" in _kernel(tr, entry).requires, entry
    # a partial-width shuffle stays the general shuffle from the lane CUDA reads
    partial = translate_to_opencl(
        f"__global__ void k(int* p) {{ p[threadIdx.x] = __shfl_down_sync({FULL}, p[threadIdx.x], 1, 8); }}",
        "p.cu",
    )
    assert "sub_group_shuffle(p[(uint)get_local_id(0)], porter_lane_down((uint)(1), 8u))" in partial.text
    assert "porter_shuffle_down" not in partial.text.split("__kernel")[1]


def test_the_probe_runs_the_translations_helper() -> None:
    """One source of truth: the sub-group probe is assembled with the [warp_helpers] text a translation emits."""
    from porter.backends.opencl.devices import subgroup_probe_source

    probe = subgroup_probe_source()
    assert _helper() in probe and "PORTER_WARP_HELPERS" not in probe
    body = probe.split("__kernel void porter_subgroup_32_sum")[1].split("}")[0]
    assert "v += porter_shuffle_down(v, d);" in body
    xor = probe.split("__kernel void porter_subgroup_xor_sum")[1].split("}")[0]
    assert "sub_group_shuffle_xor(v, m)" in xor and "if (get_local_id(0) == 0)" in xor


def test_a_broken_probe_takes_the_requirement_away_and_says_so() -> None:
    from porter.backends.opencl.requirements import Capabilities, describe, disabled, missing, supports

    declared = frozenset(
        {
            "cl_khr_subgroups",
            "cl_khr_subgroup_shuffle",
            "cl_khr_subgroup_shuffle_relative",
            "cl_intel_subgroups",
        }
    )
    good = Capabilities(extensions=declared)
    bad = Capabilities(extensions=declared, broken=frozenset({"subgroup_shuffle"}))
    assert supports(good, "subgroup_shuffle") and disabled(good) == ()
    assert not supports(bad, "subgroup_shuffle") and supports(bad, "subgroup_shuffle_relative")
    assert disabled(bad) == ("-DPORTER_NO_SUBGROUP_SHUFFLE",)
    assert missing(bad, ["subgroups", "subgroup_shuffle"]) == ["subgroup_shuffle"]
    assert "cl_khr_subgroup_shuffle: declared, but it failed porter's probe" in describe(
        ["subgroup_shuffle"], bad.broken
    )
    # a job's child knows only what the device declares: the parent's options carry the probe's verdicts
    assert (
        disabled(Capabilities(extensions=declared, broken=frozenset({"subgroup_shuffle"}), probed=False))
        == ()
    )
    # the guard of a kernel needing general shuffles tests the macro
    tr = translate_to_opencl(
        f"__global__ void k(int* p) {{ p[0] = __shfl_xor_sync({FULL}, p[0], 1); }}", "x.cu"
    )
    assert "defined(cl_khr_subgroup_shuffle) && !defined(PORTER_NO_SUBGROUP_SHUFFLE)" in tr.text


def _real_devices() -> list[Any]:
    from porter.backends.opencl import OpenCLBackend

    return [d for d in OpenCLBackend().devices() if d.kind != "checker"]


DEVICES = _real_devices()


@pytest.fixture(params=DEVICES or [None], ids=lambda d: d.label if d is not None else "none")
def device(request: pytest.FixtureRequest) -> Any:
    if request.param is None:
        pytest.skip("no OpenCL device (install pocl-opencl-icd, or pip install intel-opencl-rt)")
    return request.param


@pytest.mark.integration
def test_the_probes_verdicts_are_consistent(device: Any) -> None:
    """Never a hard-coded vendor: a device granted 32-wide sub-groups computes the probe's down-reduction
    right (and its warp size is 32); one that declares general shuffles but failed their probe gets the
    disable macro in both build paths' -D options; one that passed computes the xor sum right."""
    from porter.backends.opencl.devices import live, subgroup_probe_source
    from porter.backends.opencl.requirements import build_options, device_defines, disabled, supports

    entry = live(device)
    assert entry is not None
    caps = entry.caps
    if not supports(caps, "subgroups"):
        assert not supports(
            caps, "reqd_sub_group_size_32"
        ) and "-DPORTER_NO_SUBGROUP_SHUFFLE" not in disabled(caps)
        pytest.skip(f"{device.label} has no sub-groups")
    import pyopencl as cl

    options = " ".join(build_options(caps, ["subgroups"]))
    ctx = cl.Context([entry.cl_device])
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, subgroup_probe_source()).build(options)
    names = set(str(program.get_info(cl.program_info.KERNEL_NAMES)).split(";"))

    def lane0(name: str) -> int:
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
        cl.enqueue_fill_buffer(queue, buf, np.int32(-7), 0, 64 * 4)
        cl.Kernel(program, name)(queue, (64,), (64,), buf)
        out = np.empty(64, np.int32)
        cl.enqueue_copy(queue, out, buf)
        return int(out[0])

    if supports(caps, "reqd_sub_group_size_32"):
        assert device.facts.warp_size == 32
        assert lane0("porter_subgroup_32_sum") == 496
    elif "cl_intel_required_subgroup_size" in caps.extensions:
        assert "reqd_sub_group_size_32" in caps.broken or 32 not in caps.sub_group_sizes
        assert "-DPORTER_NO_SUBGROUP_32" in disabled(caps)
    if "subgroup_shuffle" in caps.broken:
        assert "cl_khr_subgroup_shuffle" in caps.extensions
        assert "-DPORTER_NO_SUBGROUP_SHUFFLE" in device_defines(caps)  # pyopencl's builds
        assert "-DPORTER_NO_SUBGROUP_SHUFFLE" in disabled(caps)  # porter_opencl.h's (PORTER_OPENCL_DEFINES)
        assert not supports(caps, "subgroup_shuffle")
    elif "porter_subgroup_xor_sum" in names and "cl_intel_required_subgroup_size" in caps.extensions:
        assert lane0("porter_subgroup_xor_sum") == 496


@pytest.mark.integration
def test_the_program_run_env_carries_the_disable_macros(device: Any) -> None:
    """porter_opencl.h's build of a port's .cl gets the same -D options (PORTER_OPENCL_DEFINES)."""
    from porter.backends.opencl.devices import capabilities
    from porter.backends.opencl.program import program_toolchains
    from porter.backends.opencl.requirements import disabled, emulation_defines

    toolchains = program_toolchains([device])
    if not toolchains:
        pytest.skip("no CPU backend here to build a port's host code")
    caps = capabilities(device)
    env = toolchains[0].run_env()
    # and porter's own sub-groups where they passed its probe (NVIDIA's OpenCL): set even when empty, porter's
    # choice rather than the runtime's own rule
    assert env["PORTER_OPENCL_DEFINES"] == " ".join((*disabled(caps), *emulation_defines(caps)))


@pytest.mark.integration
def test_translated_shuffle_down_reductions_validate(device: Any) -> None:
    """Our own shuffle-down reductions, translated, sum right on every device that meets their requirements
    (Intel's CPU runtime among them, through intel_sub_group_shuffle_down); where one lacks them it says so."""
    from porter.backends.opencl import OpenCLBackend, missing_requirements

    tr = _translation()
    backend = OpenCLBackend()
    k = _kernel(tr, "warp_sums")
    lacks = missing_requirements(device, k.requires)
    if lacks:
        pytest.skip(f"{device.label} lacks {', '.join(lacks)}")
    rng = np.random.default_rng(3)
    blocks, threads = 4, 128
    data = rng.integers(-50, 50, blocks * threads).astype(np.int32)
    out = launch_translated(
        backend, device, tr.text, k, [data, np.zeros(blocks * 4, np.int32)], (blocks,), (threads,)
    )
    assert np.array_equal(out[1], data.reshape(-1, 32).sum(axis=1))
    # a work-group of 4: lanes its sub-group lacks read 0, as on NVIDIA GPUs (the CUDA samples' reduce4<T, 4>)
    small = launch_translated(
        backend, device, tr.text, _kernel(tr, "block_sums"), [data[:32], np.zeros(8, np.int32)], (8,), (4,)
    )
    assert np.array_equal(small[1], data[:32].reshape(8, 4).sum(axis=1)), small[1]
    for entry, dtype in (("float_sums", np.float32), ("tile_sums", np.int32)):
        vals = (rng.integers(0, 64, 4 * 32) / 4).astype(dtype)
        got = launch_translated(
            backend, device, tr.text, _kernel(tr, entry), [vals, np.zeros(4, dtype)], (4,), (32,)
        )
        assert np.array_equal(got[1], vals.reshape(4, 32).sum(axis=1)), entry
    counts = launch_translated(
        backend, device, tr.text, _kernel(tr, "once"), [np.zeros(64, np.int32)], (2,), (32,)
    )
    assert np.all(counts[0] // 100 == 1), counts[0]  # i++ happened once in every work-item


BUILD = """
import sys, warnings
import pyopencl as cl
warnings.simplefilter("ignore")
src = open(sys.argv[1]).read()
for p in cl.get_platforms():
    for d in p.get_devices():
        prog = cl.Program(cl.Context([d]), src).build("")
        print(p.name.strip(), "|", prog.get_info(cl.program_info.KERNEL_NAMES))
"""


@pytest.mark.integration
def test_the_helper_builds_under_oclgrind(tmp_path: Path) -> None:
    """Oclgrind (OpenCL C 1.2, no sub-groups): the file builds, the shuffle kernels guarded out."""
    from porter.backends.opencl.oclgrind import oclgrind_path, oclgrind_wrapper

    if oclgrind_path() is None:
        pytest.skip("oclgrind is not installed (apt-get install oclgrind)")
    path = tmp_path / "shuffles.cl"
    path.write_text(_translation().text, encoding="utf-8")
    log = tmp_path / "oclgrind.log"
    cmd = [*oclgrind_wrapper(str(log)), sys.executable, "-c", BUILD, str(path)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line for line in run.stdout.splitlines() if "|" in line]
    assert lines, run.stdout + run.stderr
    for line in lines:
        assert "warp_sums" not in line.split("|")[1], line
