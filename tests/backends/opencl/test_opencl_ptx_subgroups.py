"""Sub-groups on an OpenCL that has none but takes inline PTX (dialect.toml [facts.ptx_subgroups],
ptx_subgroups.cl): NVIDIA's OpenCL declares no cl_khr_subgroups, so without this a translated kernel that uses
CUDA's warp shuffles, votes or cooperative-group reductions was left out on the GPU (issues #29/#30: the CUDA
samples' reduction, 8 of its launched kernels).  The rule, the text a translation carries, the build paths that
switch it on, the probe that must pass before they do, and (on an NVIDIA GPU) the values it computes against a
model of CUDA's warps."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from porter.backends.opencl import requirements
from porter.backends.opencl.requirements import (
    Capabilities,
    build_options,
    device_defines,
    emulation_defines,
    ptx_subgroups_rule,
    ptx_subgroups_source,
    supports,
    with_ptx_subgroups,
)
from porter.backends.opencl.translate import translate_to_opencl

DEFINE = "PORTER_PTX_SUBGROUPS"
NVIDIA = Capabilities(
    extensions=frozenset({"cl_khr_fp64", "cl_nv_device_attribute_query"}),
    c_versions=((1, 2), (3, 0)),
    device_type="gpu",
    vendor="NVIDIA Corporation",
)


def test_the_rule_gives_an_nvidia_gpu_without_subgroups_porters_own() -> None:
    emulated = with_ptx_subgroups(NVIDIA)
    assert emulated is not None
    assert emulated.emulated and emulated.emulated <= emulated.extensions
    assert "cl_khr_subgroups" in emulated.emulated and "cl_nv_device_attribute_query" not in emulated.emulated
    # what the probe then finds: 32-wide sub-groups
    proven = Capabilities(
        **{**emulated.__dict__, "sub_group_sizes": frozenset({32}), "max_sub_group_size": 32}
    )
    for need in ("subgroups", "subgroup_shuffle", "subgroup_shuffle_relative", "subgroup_ballot"):
        assert supports(proven, need), need
    assert supports(proven, "reqd_sub_group_size_32")
    # every build path defines the switch: pyopencl's (device_defines), a kernel's requirement options, the
    # program runtime's (emulation_defines through PORTER_OPENCL_DEFINES)
    assert f"-D{DEFINE}" in device_defines(proven)
    assert f"-D{DEFINE}" in build_options(proven, ["subgroups"])
    # OpenCL C 1.2 functions: no -cl-std for what only porter's text gives (on an H100 the -cl-std=CL3.0 builds
    # came without the shuffle kernels), while a device with sub-groups of its own gets the OpenCL C they need
    assert not any(o.startswith("-cl-std=") for o in build_options(proven, ["subgroups", "subgroup_shuffle"]))
    native = Capabilities(
        extensions=frozenset({"cl_khr_subgroups", "cl_khr_subgroup_shuffle"}), c_versions=((1, 2), (3, 0))
    )
    assert build_options(native, ["subgroups", "subgroup_shuffle"]) == ("-cl-std=CL3.0",)
    assert emulation_defines(proven) == (f"-D{DEFINE}",)
    assert emulation_defines(NVIDIA) == ()


@pytest.mark.parametrize(
    "caps",
    [
        Capabilities(
            extensions=frozenset({"cl_khr_subgroups"}), device_type="gpu", vendor="NVIDIA Corporation"
        ),
        Capabilities(features=frozenset({"__opencl_c_subgroups"}), device_type="gpu", vendor="NVIDIA"),
        Capabilities(device_type="cpu", vendor="NVIDIA Corporation"),
        Capabilities(device_type="gpu", vendor="Advanced Micro Devices, Inc."),
        Capabilities(device_type="cpu", vendor="The pocl project"),
    ],
    ids=["declares-khr", "declares-feature", "not-a-gpu", "another-vendor", "pocl"],
)
def test_the_rule_leaves_every_other_device_alone(caps: Capabilities) -> None:
    assert with_ptx_subgroups(caps) is None
    assert DEFINE not in " ".join(device_defines(caps))


CUDA = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void warp_total(const int* in, int* out) {
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
    if (threadIdx.x % 32 == 0) out[blockIdx.x * blockDim.x / 32 + threadIdx.x / 32] = v;
}
__global__ void votes(const int* in, unsigned* out) {
    int v = in[threadIdx.x];
    out[threadIdx.x] = __ballot_sync(0xffffffffu, v > 0) + __any_sync(0xffffffffu, v == 3) + __all_sync(0xffffffffu, v < 9);
}
__global__ void tile_max(const float* in, float* out) {
    cg::thread_block_tile<32> t = cg::tiled_partition<32>(cg::this_thread_block());
    float v = in[threadIdx.x];
    for (int d = 1; d < 32; d *= 2) v = fmaxf(v, t.shfl_xor(v, d));
    out[threadIdx.x] = v;
}
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
"""


def test_a_translation_needing_subgroups_carries_the_text_behind_the_switch() -> None:
    tr = translate_to_opencl(CUDA, "warps.cu")
    needing = [k for k in tr.kernels if "subgroups" in requirements.closure(k.requires)]
    assert {k.entry for k in needing} >= {"warp_total", "votes", "tile_max"}
    assert tr.text.count(ptx_subgroups_source()) == 1
    start = tr.text.index(f"#if defined({DEFINE})")
    # ahead of every kernel and of the guards that ask for cl_khr_subgroups, after the extension pragmas
    assert start < tr.text.index("__kernel") and start < tr.text.index("defined(cl_khr_subgroup_shuffle")
    plain = translate_to_opencl("__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }", "s.cu")
    assert DEFINE not in plain.text


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (apt-get install clang-19; ptxas comes with CUDA's nvcc)")
    return path


# Work-item functions for a PTX build without an OpenCL library (clang's nvptx target has no libclc here):
# the PTX special registers NVIDIA's OpenCL reads for them.
IDS = """
size_t __attribute__((overloadable)) get_local_id(uint d)
{ return d == 0u ? __nvvm_read_ptx_sreg_tid_x() : d == 1u ? __nvvm_read_ptx_sreg_tid_y() : __nvvm_read_ptx_sreg_tid_z(); }
size_t __attribute__((overloadable)) get_local_size(uint d)
{ return d == 0u ? __nvvm_read_ptx_sreg_ntid_x() : d == 1u ? __nvvm_read_ptx_sreg_ntid_y() : __nvvm_read_ptx_sreg_ntid_z(); }
size_t __attribute__((overloadable)) get_global_id(uint d)
{ return d == 0u ? __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x() : 0; }
"""

# Every function of the text, in the types a translation uses (the GPU test below checks their values).
CHECK = """
__kernel void porter_ptx_check(__global const int* x, __global const double* xd, __global int* out,
                               __global double* outd)
{
    uint g = get_global_id(0);
    int v = x[g];
    __global int* o = out + g * 16u;
    o[0] = (int)get_sub_group_local_id();
    o[1] = (int)get_sub_group_size();
    o[2] = (int)get_sub_group_id();
    o[3] = (int)get_num_sub_groups();
    o[4] = sub_group_reduce_add(v);
    o[5] = sub_group_shuffle_down(v, 3u);
    o[6] = sub_group_shuffle_up(v, 2u);
    o[7] = sub_group_shuffle_xor(v, 5u);
    o[8] = sub_group_shuffle(v, get_sub_group_local_id() * 7u + 32u);  /* CUDA's index: modulo the warp */
    o[9] = sub_group_scan_exclusive_add(v);
    o[10] = sub_group_scan_inclusive_max(v);
    o[11] = sub_group_reduce_min(v);
    o[12] = sub_group_reduce_xor(v);
    o[13] = sub_group_all(v > -1000) + 2 * sub_group_any(v == 17);
    o[14] = (int)sub_group_ballot(v & 1).x;
    o[15] = sub_group_clustered_reduce_add(v, 8u);
    double d = xd[g];
    outd[g * 4u + 0u] = sub_group_reduce_add(d);
    outd[g * 4u + 1u] = sub_group_shuffle_down(d, 1u);
    outd[g * 4u + 2u] = sub_group_scan_inclusive_add(d);
    outd[g * 4u + 3u] = (double)sub_group_reduce_max((float)d);
    sub_group_barrier(CLK_LOCAL_MEM_FENCE);
}
"""


@pytest.mark.integration
def test_the_text_is_ptx_that_ptxas_takes(tmp_path: Path) -> None:
    """clang's OpenCL front end for NVIDIA's PTX (-target nvptx64-nvidia-nvcl) takes the text and a kernel
    calling every function, and ptxas assembles the result for sm_90: the inline PTX is PTX an NVIDIA driver
    accepts, checked without a GPU."""
    clang, ptxas = _tool("clang-19"), _tool("ptxas")
    source = tmp_path / "check.cl"
    source.write_text(IDS + ptx_subgroups_source() + "\n" + CHECK, encoding="utf-8")
    ptx = tmp_path / "check.ptx"
    build = [clang, "-x", "cl", "-cl-std=CL1.2", "-target", "nvptx64-nvidia-nvcl", "-Xclang", "-target-cpu"]
    build += ["-Xclang", "sm_90", "-Xclang", "-finclude-default-header", f"-D{DEFINE}", "-O2", "-S"]
    done = subprocess.run([*build, "-o", str(ptx), str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    text = ptx.read_text()
    for instruction in ("shfl.sync.down.b32", "shfl.sync.up.b32", "shfl.sync.bfly.b32", "shfl.sync.idx.b32"):
        assert instruction in text, instruction
    assert "vote.sync.ballot.b32" in text and "bar.warp.sync" in text
    assembled = subprocess.run(
        [ptxas, "-arch=sm_90", str(ptx), "-o", str(tmp_path / "check.o")], capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert assembled.returncode == 0, assembled.stderr
    # and a whole translation needing sub-groups builds with it (clang's own checks: no PTX library to link)
    tr = translate_to_opencl(CUDA, "warps.cu")
    whole = tmp_path / "warps.cl"
    whole.write_text(tr.text, encoding="utf-8")
    done = subprocess.run([*build, "-o", str(tmp_path / "warps.ptx"), str(whole)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    entries = (tmp_path / "warps.ptx").read_text()
    assert all(f".entry {name}" in entries for name in ("warp_total", "votes", "tile_max")), entries[:2000]


@pytest.mark.integration
def test_a_device_whose_probe_fails_with_it_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """The text only ever runs where porter's probe computed right with it: a CPU device the rule is made to
    name builds inline PTX it cannot take, the probe fails, and the device keeps what it declared (no sub-groups
    it does not have, no define in its builds)."""
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from porter.backends.opencl import OpenCLBackend, devices

    cpu = [d for d in OpenCLBackend().devices() if d.kind == "cpu"]
    entry = next((devices.live(d) for d in cpu if devices.live(d) is not None), None)
    if entry is None:
        pytest.skip("no CPU OpenCL device (apt-get install pocl-opencl-icd)")
    declared = entry.caps
    if any(m in declared.extensions for m in requirements.SUBGROUP_MARKS):
        pytest.skip(f"{entry.device.label} has sub-groups of its own")
    rule = dict(ptx_subgroups_rule(), device_types=["cpu"], vendors=[declared.vendor])
    monkeypatch.setattr(requirements, "ptx_subgroups_rule", lambda: rule)
    assert with_ptx_subgroups(declared) is not None  # the rule names it
    import pyopencl as cl

    caps = devices._sub_group_capabilities(cl, entry.cl_device)
    assert not caps.emulated and "cl_khr_subgroups" not in caps.extensions
    assert not supports(caps, "subgroups") and DEFINE not in " ".join(device_defines(caps))


def test_the_program_runtime_gets_the_rule_and_porters_choice() -> None:
    """porter_opencl.h gets the rule (generated beside the port's sources) for runs without porter, and under
    porter PORTER_OPENCL_DEFINES is always set: the runtime's own rule never overrides porter's probe."""
    from porter.backends.opencl.program import native_math_source

    text = native_math_source()
    assert f'porter_ptx_subgroups_define[] = "{DEFINE}"' in text
    assert "porter_ptx_subgroups_types = 0x4;" in text  # CL_DEVICE_TYPE_GPU
    assert 'porter_ptx_subgroups_vendors[] = {"NVIDIA"}' in text
    header = (Path(requirements.__file__).with_name("porter_opencl.h")).read_text()
    assert "else if (text.find(porter_ptx_subgroups_define)" in header


def test_a_jobs_child_gets_the_parents_probe_with_the_jobs_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay's child adopts its device unprobed (devices.adopt: only what the device declares), so porter's
    sub-groups, which only the parent's probe switches on, come with the job's build options.  On an H200 the
    translated shuffle reductions' replays were built without the define and came out without their kernels
    ("the kernel alone does not build for its replay, though the opencl program builds")."""
    import porter.backends.opencl as opencl_backend
    from porter.backends import CompileOptions, Device

    from porter.harness.trial import make_job
    from porter.model import KernelSpec, Variant

    proven = Capabilities(
        **{
            **with_ptx_subgroups(NVIDIA).__dict__,
            "sub_group_sizes": frozenset({32}),
            "max_sub_group_size": 32,
        }
    )
    gpu = Device("opencl", "NVIDIA H200", "opencl-3.0/gpu", kind="gpu", platform="NVIDIA CUDA")
    monkeypatch.setattr(opencl_backend, "capabilities", lambda device: proven)
    spec = KernelSpec("k", (), ("1",), ("1",))
    variant = Variant("k", "opencl", "__kernel void k() {}", "k", "translate", options=("-cl-mad-enable",))
    job, _ = make_job(variant, spec, gpu, None, 1, CompileOptions(), 0)
    assert job.options.flags == ("-cl-mad-enable", f"-D{DEFINE}"), job.options.flags
    # what the child itself would add: nothing of the probe's, from the declared capabilities it adopts
    adopted = Capabilities(**{**NVIDIA.__dict__, "probed": False})
    assert DEFINE not in " ".join(device_defines(adopted))
    # a device without them: the job's options as planned
    monkeypatch.setattr(opencl_backend, "capabilities", lambda device: NVIDIA)
    assert make_job(variant, spec, gpu, None, 1, CompileOptions(), 0)[0].options.flags == ("-cl-mad-enable",)


def _model(x: np.ndarray, xd: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """What CUDA's warps give for CHECK's 16 integers and 4 doubles per work-item, in work-groups of `group`."""
    out = np.zeros((x.size, 16), np.int64)
    outd = np.zeros((x.size, 4), np.float64)
    for base in range(0, x.size, group):
        for first in range(0, group, 32):
            size = min(32, group - first)
            lanes = x[base + first : base + first + size].astype(np.int64)
            dl = xd[base + first : base + first + size]
            for lane in range(size):
                row = out[base + first + lane]
                v = lanes[lane]
                row[0:4] = (lane, size, first // 32, (group + 31) // 32)
                row[4] = lanes.sum()
                src = lane + 3
                row[5] = lanes[src] if src < size else (0 if src < 32 else v)
                row[6] = lanes[lane - 2] if lane >= 2 else v
                src = lane ^ 5
                row[7] = lanes[src] if src < size else 0
                src = (lane * 7 + 32) % 32
                row[8] = lanes[src] if src < size else 0
                row[9] = lanes[:lane].sum()
                row[10] = lanes[: lane + 1].max()
                row[11] = lanes.min()
                row[12] = np.bitwise_xor.reduce(lanes)
                row[13] = int(bool(np.all(lanes > -1000))) + 2 * int(bool(np.any(lanes == 17)))
                row[14] = sum(1 << i for i in range(size) if lanes[i] & 1)
                row[15] = lanes[(lane // 8) * 8 : (lane // 8) * 8 + 8].sum()
                d = outd[base + first + lane]
                d[0] = dl.sum()
                d[1] = dl[lane + 1] if lane + 1 < size else (0.0 if lane + 1 < 32 else dl[lane])
                d[2] = dl[: lane + 1].sum()
                d[3] = float(np.float32(dl.astype(np.float32).max()))
    out[:, 14] = out[:, 14].astype(np.uint32).astype(np.int32)  # a 32-bit ballot, read as int
    return out, outd


@pytest.mark.gpu
@pytest.mark.parametrize("group", [64, 48, 96])
def test_on_an_nvidia_gpu_they_compute_as_cuda_warps(group: int) -> None:
    """On NVIDIA's OpenCL, after its probe: every function against a model of CUDA's warps, in whole warps and
    in a work-group whose last warp is partial (48: 32 + 16), through porter's own kernel build."""
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from porter.backends import get_backend
    from porter.backends.opencl.devices import capabilities

    backend = get_backend("opencl")
    found = [d for d in backend.devices() if d.kind == "gpu" and "NVIDIA" in d.platform.upper()]
    if not found:
        pytest.skip("no NVIDIA OpenCL device (register libnvidia-opencl.so.1 with the ICD loader)")
    device = found[0]
    caps = capabilities(device)
    if not caps.emulated and supports(caps, "subgroups"):
        pytest.skip(f"{device.label} has sub-groups of its own")
    assert caps.emulated, f"porter's sub-group probe failed with ptx_subgroups.cl on {device.label}"
    assert supports(caps, "reqd_sub_group_size_32") and device.facts.warp_size == 32
    rng = np.random.default_rng(group)
    groups = 3
    x = rng.integers(-40, 40, groups * group).astype(np.int32)
    x[5] = 17
    xd = rng.uniform(-1, 1, groups * group)
    source = ptx_subgroups_source() + "\n" + CHECK
    program = backend.load(backend.compile(source, "porter_ptx_check", device=device), device)
    args: list[Any] = [backend.to_device(x, device), backend.to_device(xd, device)]
    args += [backend.to_device(np.full(x.size * 16, -99, np.int32), device)]
    args += [backend.to_device(np.full(x.size * 4, np.nan), device)]
    program(*args, grid=(groups,), block=(group,))
    backend.synchronize(device)
    got = backend.to_host(args[2], np.int32, (x.size, 16)).astype(np.int64)
    gotd = backend.to_host(args[3], np.float64, (x.size, 4))
    want, wantd = _model(x, xd, group)
    names = [
        "lane",
        "size",
        "id",
        "groups",
        "add",
        "down",
        "up",
        "xor",
        "idx",
        "exscan",
        "inmax",
        "min",
        "bxor",
        "votes",
        "ballot",
        "cluster8",
    ]
    for col, name in enumerate(names):
        bad = np.nonzero(got[:, col] != want[:, col])[0]
        assert bad.size == 0, (
            f"{name}: work-item {bad[0]} got {got[bad[0], col]}, CUDA's warps {want[bad[0], col]}"
        )
    np.testing.assert_allclose(gotd, wantd, rtol=1e-12, atol=1e-12)
