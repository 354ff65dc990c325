"""The capturing nvcc build (backends/cuda/porter_capture_cuda.h): a CUDA program's own run on an NVIDIA
GPU records its launches in the format the CPU runtime writes (docs/CAPTURE_FORMAT.md).

On the CPU machine: the instrumented build compiles and links with nvcc, and a program that builds only as
written is built so, without capture.  On a GPU (``gpu``): the capture of the capture tour's native run
agrees with the CPU runtime's capture of the same run, launch by launch.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from porter.backends import get_backend
from porter.backends.programs import ProgramSource

from porter import capture
from porter.errors import UsageError
from porter.workflows.program_run import ProgramRuns

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "tests" / "fixtures" / "programs" / "capture_tour"
pytestmark = pytest.mark.integration


def _nvcc_chain():  # type: ignore[no-untyped-def]
    chain = get_backend("cuda").program_toolchains()[0]
    if chain.unavailable():
        pytest.skip(f"nvcc is not installed: {chain.unavailable()}")
    return chain


def test_the_capturing_build_compiles_an_instrumented_copy_and_leaves_the_program_alone(
    tmp_path: Path,
) -> None:
    chain = _nvcc_chain()
    assert chain.captures and " capture " in chain.toolchain_id()
    before = (TOUR / "main.cu").read_bytes()
    built = chain.build(ProgramSource(TOUR, ("main.cu",), original_root=TOUR), tmp_path / "b")
    assert built.ok and built.captures, built.log
    copy = (tmp_path / "b" / "capture" / "src" / "main.cu").read_text()
    # every launch through porter's wrapper, the template kernel's too; the globals registered
    assert "<<<" not in copy.split("int main()", 1)[1]
    assert "porter_emu::launch_kernel(ramp<32>, porter_emu::config(4, 32)" in copy
    assert "PORTER_REGISTER_SYMBOL(c_gain, true);" in copy and "PORTER_REGISTER_SYMBOL(hits, false);" in copy
    assert copy.count("\n") > before.decode().count("\n")  # registrations appended, lines kept above
    assert any("-include porter_capture_cuda.h" in c for c in built.commands)
    assert (TOUR / "main.cu").read_bytes() == before


def test_a_program_that_only_builds_as_written_is_built_so_without_capture(tmp_path: Path) -> None:
    chain = _nvcc_chain()
    broken = tmp_path / "porter_capture_cuda.h"
    broken.write_text("#error the instrumented build cannot compile here\n")
    built = dataclasses.replace(chain, capture_header=broken).build(
        ProgramSource(TOUR, ("main.cu",), original_root=TOUR), tmp_path / "b"
    )
    assert built.ok and built.captures is False
    assert "the capturing build failed" in built.log and "built as written, without capture" in built.log


# Ours: a program written for an older toolkit -- the device properties CUDA 13 removed from cudaDeviceProp
# (Rodinia's gaussian prints clockRate and deviceOverlap, huffman tests deviceOverlap) and cudaThreadSynchronize
OLD_TOOLKIT = """#include <cstdio>
__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }
int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  if (!prop.deviceOverlap) printf("no overlap\\n");
  printf("%s at %d kHz, memory %d kHz, mode %d\\n", prop.name, prop.clockRate, prop.memoryClockRate, prop.computeMode);
  float* d;
  cudaMalloc(&d, 32 * sizeof(float));
  twice<<<1, 32>>>(d);
  cudaThreadSynchronize();
  return 0;
}
"""


def test_a_program_for_an_older_toolkit_builds_and_its_unit_compiles_for_a_replay(tmp_path: Path) -> None:
    """What CUDA 13 removed and older programs use is restored (porter_cuda_legacy.h) in the original's capturing
    build and in a kernel replay's nvcc build of its unit: both compile, the program's file untouched."""
    from porter.backends import CompileOptions

    chain = _nvcc_chain()
    prog = tmp_path / "old"
    prog.mkdir()
    (prog / "main.cu").write_text(OLD_TOOLKIT)
    built = chain.build(ProgramSource(prog, ("main.cu",), original_root=prog), tmp_path / "b")
    assert built.ok and built.captures, built.log
    assert (prog / "main.cu").read_text() == OLD_TOOLKIT
    unit = get_backend("cuda").compile(OLD_TOOLKIT, "twice", CompileOptions(arch="sm_90"), compiler="nvcc")
    assert unit.entry == "_Z5twicePf" and unit.data[:4] == b"\x7fELF"


def test_capture_names_the_toolchains_it_can_use(tmp_path: Path) -> None:
    from porter.workflows.capture import capture_program, capturing_toolchains

    assert {"nvcc", "cpu-runtime"} <= set(capturing_toolchains())
    shutil.copytree(TOUR, tmp_path / "tour")
    with pytest.raises(UsageError, match="not a capturing toolchain"):
        capture_program([str(tmp_path / "tour")], ProgramRuns(("./main",)), toolchain="hipcc")


# --------------------------------------------------------------------------- on an NVIDIA GPU


def _by_launch(folder: Path) -> dict[tuple[str, int], capture.Launch]:
    return {(la.kernel, la.launch): la for la in capture.load(folder).launches}


@pytest.mark.gpu
def test_a_native_gpu_capture_agrees_with_the_cpu_runtimes_capture_of_the_same_run(tmp_path: Path) -> None:
    from porter.workflows.capture import capture_program

    _nvcc_chain()
    shutil.copytree(TOUR, tmp_path / "tour")
    gpu = capture_program(
        [str(tmp_path / "tour")],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "gpu"),
    )
    assert gpu.exit_code == 0 and gpu.device.startswith("cuda:"), gpu
    cpu = capture_program(
        [str(tmp_path / "tour")],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "cpu"),
        toolchain="cpu-runtime",
    )
    assert cpu.exit_code == 0, cpu
    on_gpu, on_cpu = _by_launch(tmp_path / "gpu" / "run-1"), _by_launch(tmp_path / "cpu" / "run-1")
    assert set(on_gpu) == set(on_cpu)
    assert on_gpu[("scale", 8)].device.startswith("cuda:")
    for key, g in on_gpu.items():
        c = on_cpu[key]
        assert (g.grid, g.block, g.shared_bytes, g.status, g.skipped != "") == (
            c.grid, c.block, c.shared_bytes, c.status, c.skipped != "",
        ), key  # fmt: skip
        for ga, ca in zip(g.args, c.args, strict=True):
            assert (ga.kind, ga.ctype, ga.dtype, ga.offset, ga.why) == (
                ca.kind,
                ca.ctype,
                ca.dtype,
                ca.offset,
                ca.why,
            )
            if ga.kind == "scalar":
                assert ga.hex == ca.hex
        assert [a.bytes for a in g.allocations] == [a.bytes for a in c.allocations], key
        for i, a in enumerate(g.allocations):
            if a.before is None:
                continue
            assert g.array(i, "before") == c.array(i, "before"), key  # the host's data, copied in
            if key[0] == "total":  # float atomics: the order threads arrive in is the device's
                sums = [np.frombuffer(x.array(i, "after"), np.float32) for x in (g, c)]
                np.testing.assert_allclose(sums[0], sums[1], rtol=1e-4)
            elif any(a.kind == "pointer" and a.dtype == "float32" for a in g.args):  # an FMA may round
                got = [np.frombuffer(x.array(i, "after"), np.float32) for x in (g, c)]
                np.testing.assert_allclose(got[0], got[1], rtol=1e-6, atol=1e-7)
            else:
                assert g.array(i, "after") == c.array(i, "after"), key
        assert [(y.name, y.dtype, y.bytes) for y in g.symbols] == [
            (y.name, y.dtype, y.bytes) for y in c.symbols
        ]
    gain = on_gpu[("gain", 1)]
    table = next(i for i, y in enumerate(gain.symbols) if y.name == "c_gain")
    assert np.frombuffer(gain.symbol(table, "before"), np.float32).tolist() == [0.5, 2.0, -1.0, 3.0]
    counted = on_gpu[("count", 1)]
    hits = next(i for i, y in enumerate(counted.symbols) if y.name == "hits")
    assert counted.symbol(hits, "before") != counted.symbol(hits, "after")
    assert on_gpu[("touch", 1)].args[0].holds_device_pointer
    assert on_gpu[("shift", 2)].written == "chosen"  # named by the kernel a function pointer ran
    assert (on_gpu[("apply", 1)].args[0].bytes, on_gpu[("apply", 1)].args[0].align) == (16, 8)


@pytest.mark.gpu
def test_replays_from_a_native_capture_pass_one_buffer_twice_and_a_struct_by_value_on_the_gpu(
    tmp_path: Path,
) -> None:
    from porter.backends import CompileOptions

    from porter.harness import replay
    from porter.harness.trial import ValidateOptions
    from porter.model import Status, Variant
    from porter.plan import devices_of
    from porter.scan.extract import device_code
    from porter.workflows.capture import capture_program

    _nvcc_chain()
    shutil.copytree(TOUR, tmp_path / "tour")
    got = capture_program(
        [str(tmp_path / "tour")],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "gpu"),
    )
    assert got.exit_code == 0 and got.device.startswith("cuda:"), got
    launches = capture.by_kernel(capture.load(tmp_path / "gpu").launches)
    source = (TOUR / "main.cu").read_text()
    gpus = devices_of("cuda")
    opts = ValidateOptions(compile=CompileOptions())
    for kernel, defect in (
        ("blend", ("w * a[i] * a[i] + out[i]", "w * a[i] * a[(i + 1) % n] + out[i]")),
        ("apply", ("p.scale * y[i] + (float)p.offset", "p.scale * y[i] - (float)p.offset")),
    ):
        rep = replay.build(kernel, launches[kernel])
        assert rep.spec is not None, rep.problem
        (good,) = replay.replay(
            Variant(kernel, "cuda", device_code(source), kernel, "original"), rep, gpus[:1], opts
        )
        assert good.status is Status.VALIDATED, (kernel, good.reason, good.logs)
        bad_src = device_code(source.replace(*defect))
        (bad,) = replay.replay(Variant(kernel, "cuda", bad_src, kernel, "user"), rep, gpus[:1], opts)
        assert bad.status is Status.FAILED, (kernel, bad.reason)
