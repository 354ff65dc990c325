"""Capturing a HIP program's launches: `porter capture` of a HIP tree (porter's own port of the capture
tour) on the CPU runtime; hipcc's instrumented build (backends/hip/porter_capture_hip.h) and HIP-on-CUDA's
(CUDA's capture header under nvcc) compile and link here; on an NVIDIA GPU (``gpu``) the HIP program's
native run through HIP-on-CUDA records the launches the CPU runtime records."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from porter.backends.programs import ProgramSource, toolchains_for

from porter import capture
from porter.workflows.capture import capture_program, capturing_toolchains
from porter.workflows.program_run import ProgramRuns

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "tests" / "fixtures" / "programs" / "capture_tour"
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hip_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("the CPU runtime needs g++")
    tmp = tmp_path_factory.mktemp("hiptour")
    shutil.copytree(TOUR, tmp / "tour")
    r = subprocess.run(
        [sys.executable, "-m", "porter", "port", str(tmp / "tour"), "--to", "hip", "--out", str(tmp / "ported")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert (tmp / "ported" / "hip" / "main.cu").is_file(), r.stdout + r.stderr
    assert "hip/hip_runtime.h" in (tmp / "ported" / "hip" / "main.cu").read_text()
    return tmp / "ported" / "hip"


def _chain(name: str):  # type: ignore[no-untyped-def]
    chain = next(c for c in toolchains_for("hip") if c.name == name)
    if chain.unavailable():
        pytest.skip(f"{name}: {chain.unavailable()}")
    return chain


def test_a_hip_program_is_captured_on_the_cpu_runtime_as_its_cuda_original_is(
    hip_tree: Path, tmp_path: Path
) -> None:
    assert {"cpu-runtime", "hip-on-cuda", "hipcc"} <= set(capturing_toolchains("hip"))
    got = capture_program(
        [str(hip_tree)],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "hip"),
        toolchain="cpu-runtime",
    )
    assert got.exit_code == 0, got
    cuda = capture_program(
        [str(TOUR)],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "cuda"),
        toolchain="cpu-runtime",
    )
    assert cuda.exit_code == 0, cuda
    hip_l = {(la.kernel, la.launch): la for la in capture.load(tmp_path / "hip").launches}
    cuda_l = {(la.kernel, la.launch): la for la in capture.load(tmp_path / "cuda").launches}
    assert set(hip_l) == set(cuda_l) and ("scale", 8) in hip_l
    for key, h in hip_l.items():
        c = cuda_l[key]
        assert (h.grid, h.block, [a.kind for a in h.args]) == (c.grid, c.block, [a.kind for a in c.args]), key
        for i, a in enumerate(h.allocations):
            if a.before is not None and key[0] not in ("total",):  # float atomics: order-dependent
                assert h.array(i, "after") == c.array(i, "after"), key


@pytest.mark.parametrize("name", ["hipcc", "hip-on-cuda"])
def test_the_capturing_hip_builds_compile_and_link_and_a_port_build_is_left_as_written(
    hip_tree: Path, tmp_path: Path, name: str
) -> None:
    chain = _chain(name)
    source = ProgramSource(hip_tree, ("main.cu",), language="hip")
    built = chain.build(source, tmp_path / "capturing")
    assert built.ok and built.captures, built.log[-3000:]
    assert (tmp_path / "capturing" / "capture" / "porter-include" / chain.capture_header.name).is_file()
    plain = chain.build(
        ProgramSource(hip_tree, ("main.cu",), language="hip", capture=False), tmp_path / "plain"
    )
    assert plain.ok and plain.captures is False, plain.log[-3000:]
    assert not (tmp_path / "plain" / "capture").exists()  # a port's build is of its files as written
    assert chain.capture_header.name not in " ".join(plain.commands)


@pytest.mark.gpu
def test_a_hip_programs_native_run_through_hip_on_cuda_records_its_launches(
    hip_tree: Path, tmp_path: Path
) -> None:
    _chain("hip-on-cuda")
    got = capture_program(
        [str(hip_tree)],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "gpu"),
        toolchain="hip-on-cuda",
    )
    assert got.exit_code == 0 and got.device.startswith("hip:"), got
    cpu = capture_program(
        [str(hip_tree)],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(tmp_path / "cpu"),
        toolchain="cpu-runtime",
    )
    on_gpu = {(la.kernel, la.launch): la for la in capture.load(tmp_path / "gpu").launches}
    on_cpu = {(la.kernel, la.launch): la for la in capture.load(tmp_path / "cpu").launches}
    assert cpu.exit_code == 0 and set(on_gpu) == set(on_cpu)
    for key, g in on_gpu.items():
        c = on_cpu[key]
        assert (g.grid, g.block, g.status) == (c.grid, c.block, c.status), key
        assert [a.bytes for a in g.allocations] == [a.bytes for a in c.allocations], key
