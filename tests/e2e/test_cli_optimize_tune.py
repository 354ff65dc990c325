"""`porter optimize FILE` without --model: the autotuner, end to end on the CPU emulator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
FIXTURES = ROOT / "tests" / "fixtures"


def porter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900
    )


@pytest.fixture(autouse=True)
def _emulator() -> None:
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")


def test_every_validated_configuration_is_timed_and_the_best_launch_written_as_a_diff(tmp_path: Path) -> None:
    for name in ("vector_add.cu", "common.cuh"):
        shutil.copy(SAMPLES / name, tmp_path)
    before = (tmp_path / "vector_add.cu").read_bytes()
    r = porter("optimize", str(tmp_path / "vector_add.cu"), "--json", "--out", str(tmp_path / "out"),
               "--size", "n=100000")  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    assert doc["schema"] == "porter-tune-report/1" and doc["configs"][0]["original"]
    assert doc["size"] == {"n": 100000}  # validated at small sizes, timed at the one asked for
    assert all(c["validated"] and c["time_ms"] for c in doc["configs"]), doc["configs"]
    assert any("no GPU here" in n for n in doc["notes"])
    assert (tmp_path / "vector_add.cu").read_bytes() == before  # the user's file is never written
    if doc["best"] == "block 256":  # launches as the original does (256 threads): no new launch written
        assert any("keeps the original's launch geometry" in n for n in doc["notes"]), doc["notes"]
        assert not (tmp_path / "out" / "launch.diff").exists()
    elif doc["best"] != "the original's":
        diff = (tmp_path / "out" / "launch.diff").read_text()
        assert "-    vector_add<<<grid, block>>>" in diff and "+    vector_add<<<" in diff


def test_a_kernel_that_assumes_its_block_size_keeps_it(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "cuda" / "block_sum_256.cu", tmp_path)
    r = porter("optimize", str(tmp_path / "block_sum_256.cu"), "--json", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    by = {c["label"]: c for c in doc["configs"]}
    assert by["the original's"]["validated"] and by["block 256"]["validated"]
    for label in ("block 64", "block 128", "block 512", "block 1024"):
        assert not by[label]["validated"] and by[label]["time_ms"] is None, by[label]
    assert doc["best"] in ("the original's", "block 256")


def test_tuning_on_a_capture_uses_the_programs_launches(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "programs" / "capture_tour", tmp_path / "tour")
    r = porter(
        "capture", str(tmp_path / "tour"), "--run", "./main", "--mib", "2", "--out", str(tmp_path / "cap")
    )
    assert r.returncode == 0, r.stderr + r.stdout
    t = porter("optimize", str(tmp_path / "tour" / "main.cu"), "--kernel", "scale", "--capture", str(tmp_path / "cap"),
               "--json", "--out", str(tmp_path / "out"))  # fmt: skip
    assert t.returncode == 0, t.stderr + t.stdout[-2000:]
    doc = json.loads(t.stdout)
    assert doc["spec_source"] == "capture" and sum(c["validated"] for c in doc["configs"]) >= 2
    both = porter("optimize", str(tmp_path / "tour" / "main.cu"), "--kernel", "scale", "--capture",
                  str(tmp_path / "cap"), "--model", "openai:x")  # fmt: skip
    assert both.returncode == 2 and "--capture and --size are for the autotuner" in both.stderr
    sized = porter("optimize", str(tmp_path / "tour" / "main.cu"), "--kernel", "scale", "--capture",
                   str(tmp_path / "cap"), "--size", "n=5")  # fmt: skip
    assert sized.returncode == 2 and "a capture's are timed at their own size" in sized.stderr


@pytest.mark.gpu
def test_on_a_gpu_each_time_stands_beside_the_floor_and_compile_options_are_tried(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU (nvidia-smi not found)")
    for name in ("vector_add.cu", "common.cuh"):
        shutil.copy(SAMPLES / name, tmp_path)
    r = porter("optimize", str(tmp_path / "vector_add.cu"), "--json", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    assert doc["device"].startswith("cuda:") and doc["floor_ms"] and doc["bound"] == "memory"
    assert doc["size"]["n"] >= 1 << 24  # the benchmark size, not the validation sizes
    timed = [c for c in doc["configs"] if c["time_ms"]]
    assert all(c["pct_bandwidth"] and c["achieved_bandwidth"] for c in timed)
    assert all(c["time_ms"] >= 0.9 * doc["floor_ms"] or c["suspect"] for c in timed)
    assert any(c["flags"] for c in doc["configs"])  # the backend's option sets, on the fastest geometry


def test_a_header_from_elsewhere_is_named_with_the_flag_that_finds_it(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(
        '#include "helpers_from_elsewhere.h"\n'
        "__global__ void twice(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }\n"
        "int main() { int n = 1 << 10; float* x; cudaMalloc(&x, n * 4); twice<<<(n + 255) / 256, 256>>>(x, n); }\n"
    )
    r = porter("optimize", str(tmp_path / "k.cu"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr + r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert "k.cu:1:" in line and "helpers_from_elsewhere.h" in line and "-I DIR" in line


def test_when_a_rewrite_wins_the_users_file_is_not_rewritten_with_its_geometry(tmp_path: Path) -> None:
    from porter.harness.tune import Config, Timed
    from porter.model import KernelSpec
    from porter.workflows.options import OutputOptions, RunOptions
    from porter.workflows.tune import tune_file

    for name in ("vector_add.cu", "common.cuh"):
        shutil.copy(SAMPLES / name, tmp_path)
    rewrite = (
        "__global__ void vector_add(const float* a, const float* b, float* c, int n)\n"
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = b[i] + a[i]; }\n"
    )

    def timer(c: Config, spec: KernelSpec, device: object) -> Timed:  # the rewrite at block 128 is fastest
        return Timed(0.5 if c.source and c.block == ("128",) else 1.0)

    report = tune_file(str(tmp_path / "vector_add.cu"), output=OutputOptions(str(tmp_path / "out")), timer=timer,
                       rewrites={"the rewrite": rewrite}, run=RunOptions(sizes={"n": 5000}))  # fmt: skip
    assert report.best == "the rewrite, block 128"
    assert report.files == [] and not (tmp_path / "out" / "vector_add.cu").exists()
    assert any("the rewrite launched with block (128)" in n for n in report.notes), report.notes


@pytest.mark.gpu
def test_on_a_gpu_a_larger_block_of_a_reduction_gets_its_shared_memory_in_proportion(tmp_path: Path) -> None:
    """reduce_shfl keeps one float per warp in dynamic shared memory sized at the launch (64 bytes at 512
    threads): at 1024 threads it needs 128, which the GPU's bounds checks would catch if it were not given."""
    from porter.harness.tune import Config, Timed
    from porter.model import KernelSpec
    from porter.plan import reference_devices
    from porter.workflows.options import OutputOptions, RunOptions
    from porter.workflows.tune import tune_file

    gpus = [d for d in reference_devices() if d.kind == "gpu"]
    if not gpus:
        pytest.skip("no NVIDIA GPU porter can run kernels on")
    for name in ("reduce_shfl.cu", "common.cuh"):
        shutil.copy(SAMPLES / name, tmp_path)

    def timer(c: Config, spec: KernelSpec, device: object) -> Timed:  # 1024 threads fastest
        return Timed(0.5 if c.block == ("1024",) else 1.0)

    report = tune_file(str(tmp_path / "reduce_shfl.cu"), output=OutputOptions(str(tmp_path / "out")), timer=timer,
                       run=RunOptions(devices=tuple(gpus[:1]), sizes={"n": 1 << 16}))  # fmt: skip
    by = {c.label: c for c in report.configs}
    big = by["block 1024, shared memory in proportion"]
    assert big.validated and big.shared and "1024" in big.shared, big
    assert report.best.startswith("block 1024, shared memory in proportion"), report.best
    diff = (tmp_path / "out" / "launch.diff").read_text()
    assert "+    reduce_sum<<<" in diff and "(smem) * 1024 / (threads)>>>" in diff, diff
