"""The generated CUDA -> HIP API tables (backends/hip/tables/generate.py, cuda2hip_api.toml), the translator's
use of them, and its handling of CUDA API names HIP has no equivalent of (comment, diagnostic, --strict).

Fixtures: tests/backends/hip/tables/ (a small header in the shape of HIP's NVIDIA- and AMD-platform headers,
a few extracted HIPIFY rows) and the golden inputs api_*.cu of tests/backends/hip/golden/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from porter.backends.hip import amd_include_dir
from porter.backends.hip.tables import generate
from porter.backends.hip.translate import hip_tables, translate_to_hip

from porter.model import UNMAPPED_API, Severity

HERE = Path(__file__).parent
FIXTURES = HERE / "tables"
GOLDEN = HERE / "golden"
ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "backends" / "hip" / "cuda2hip_api.toml"
INSTALLED = Path("/usr/include/hip")


def _row(families: dict[str, dict[str, dict[str, object]]], cuda: str) -> dict[str, object]:
    found = [rows[cuda] for rows in families.values() if cuda in rows]
    assert len(found) == 1, f"{cuda}: in {len(found)} families"
    return found[0]


# --------------------------------------------------------------------------- the generator


def test_generator_reads_every_kind_of_fact_in_the_fixture_headers() -> None:
    families, inputs, conflicts = generate.build(
        FIXTURES / "include" / "hip", [FIXTURES / "hipify_fixture.txt"], None
    )
    assert _row(families, "cudaMemcpyHostToDevice")["hip"] == "hipMemcpyHostToDevice"  # #define
    assert _row(families, "cudaHostAllocMapped")["hip"] == "hipHostMallocMapped"
    assert _row(families, "cudaFuncCache")["hip"] == "hipFuncCache_t"  # typedef enum
    assert _row(families, "CUdeviceptr")["hip"] == "hipDeviceptr_t"
    assert "cudaArray" not in {
        n for rows in families.values() for n in rows
    }  # a pointer typedef says nothing
    assert _row(families, "cudaErrorMemoryAllocation")["hip"] == "hipErrorOutOfMemory"  # switch arm
    assert _row(families, "cudaErrorUnknown")["hip"] == "hipErrorUnknown"  # a label falling into default
    assert _row(families, "cudaMalloc") == {
        "hip": "hipMalloc",
        "status": "supported",
        "hip_since": "1.5.0",
        "from": "headers+hipify-docs",
    }
    # the non-deprecated wrapper wins; a body calling two CUDA functions gives no pair
    assert _row(families, "cudaHostAlloc")["hip"] == "hipHostMalloc"
    assert "cudaMemcpyAsync" not in families["runtime"] and "cudaStreamSynchronize" not in families["runtime"]
    assert _row(families, "cuMemcpyHtoD")["hip"] == "hipMemcpyHtoD"
    assert "cuMemcpyHtoD" in families["driver"]
    assert _row(families, "cudaGraphInstantiateWithFlags")["cuda"] == "11.4"  # #if CUDA_VERSION >= CUDA_11040
    # the documentation's facts: deprecated, unsupported, newer than the installed HIP
    assert _row(families, "cudaThreadSynchronize")["status"] == "deprecated"
    assert _row(families, "cudaInitDevice") == {
        "status": "unsupported",
        "cuda": "12.0",
        "from": "hipify-docs",
    }
    assert _row(families, "cudaGraphAddNode")["in_hip"] is False
    assert _row(families, "CUfunc_cache")["hip"] == "hipFuncCache_t"
    # headers (deprecated hipHostAlloc aside) and docs agree on cudaMallocHost only through the docs
    assert _row(families, "cudaMallocHost")["hip"] == "hipHostMalloc"
    assert inputs["headers"]["hip_version"] == "5.2.7"  # type: ignore[index]
    assert conflicts == []


def test_generator_cli_writes_a_table_and_refuses_a_missing_header_folder(tmp_path: Path) -> None:
    out = tmp_path / "api.toml"
    args = ["--headers", str(FIXTURES / "include" / "hip"), "--docs", str(FIXTURES / "hipify_fixture.txt")]
    assert generate.main([*args, "--hand", str(tmp_path / "none.toml"), "--out", str(out)]) == 0
    table = tomllib.loads(out.read_text())
    assert table["runtime"]["cudaMalloc"]["hip"] == "hipMalloc"
    assert table["inputs"]["hipify_docs"][0]["file"] == "hipify_fixture.txt"
    done = subprocess.run(
        [sys.executable, "-m", "porter.backends.hip.tables.generate", "--headers", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "nvidia_detail" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not (INSTALLED / "nvidia_detail").is_dir(), reason="HIP's headers are not installed")
def test_generator_on_the_installed_headers_matches_the_checked_in_table(tmp_path: Path) -> None:
    out = tmp_path / "api.toml"
    assert generate.main(["--out", str(out)]) == 0
    table = tomllib.loads(out.read_text())
    if (
        table["inputs"]["headers"]["hip_version"]
        != tomllib.loads(TABLE.read_text())["inputs"]["headers"]["hip_version"]
    ):
        pytest.skip("another HIP is installed than the one the table was generated from")
    assert out.read_text() == TABLE.read_text(), "cuda2hip_api.toml is stale: run the generator"


def test_checked_in_table_covers_the_families_and_statuses() -> None:
    table = tomllib.loads(TABLE.read_text())
    for family in ("runtime", "driver", "types", "enums", "defines", "math"):
        assert len(table[family]) > 20, family
    statuses = {row["status"] for f in generate.FAMILIES for row in table[f].values()}
    assert statuses == {"supported", "deprecated", "unsupported"}
    for cuda, hip in {
        "CUdeviceptr": "hipDeviceptr_t",
        "CUfunc_cache": "hipFuncCache_t",
        "cuMemHostAlloc": "hipHostMalloc",
        "cudaGraphCreate": "hipGraphCreate",
        "cudaGraphNode_t": "hipGraphNode_t",
        "cudaGraphInstantiateWithFlags": "hipGraphInstantiateWithFlags",
        "cudaFuncSetAttribute": "hipFuncSetAttribute",
        "cudaHostAlloc": "hipHostMalloc",
        "cudaHostAllocMapped": "hipHostMallocMapped",
        "CU_MEMHOSTALLOC_PORTABLE": "hipHostMallocPortable",
    }.items():
        assert _row(table, cuda)["hip"] == hip


# --------------------------------------------------------------------------- the translator


def test_the_hand_table_wins_and_nothing_it_maps_is_lost() -> None:
    t = hip_tables()
    hand = tomllib.loads((ROOT / "backends" / "hip" / "cuda2hip.toml").read_text())
    for group, renames in hand["rename"].items():
        for cuda, hip in renames.items():
            assert t.renames[cuda] == hip, f"{group}: {cuda}"
    assert t.renames["cudaMallocHost"] == "hipHostMalloc"
    assert t.renames["cuMemHostAlloc"] == "hipHostMalloc"


def test_unmapped_api_names_are_kept_commented_and_reported() -> None:
    src = GOLDEN / "api_unmapped.cu"
    tr = translate_to_hip(src.read_text(), str(src))
    lines = tr.text.splitlines()
    assert lines[14].endswith("// porter: cudaInitDevice has no HIP equivalent (HIP 5.2)")
    assert "cudaInitDevice(0, 0, 0)" in lines[14]
    # a macro line continued with a backslash gets block comments, so the continuation holds
    assert lines[4].endswith("\\") and "/* porter: cudaDeviceFlushGPUDirectRDMAWrites has no HIP" in lines[4]
    unmapped = {(d.line, d.construct) for d in tr.diagnostics if d.code == UNMAPPED_API}
    assert (15, "cudaInitDevice") in unmapped and (12, "cudaStreamGetAttribute") in unmapped
    # a call in a form CUDA 12/13 changed and HIP 5.2 lacks: named with its argument count, and why
    assert {
        (23, "cudaGraphExecUpdate with 3 arguments"),
        (24, "cudaGraphAddDependencies with 5 arguments"),
    } <= unmapped
    edge = next(d for d in tr.diagnostics if d.construct == "cudaGraphAddDependencies with 5 arguments")
    assert "argument 4 (edge) is not null" in edge.reason
    assert lines[22].endswith(
        "// porter: cudaGraphExecUpdate with 3 arguments has no HIP equivalent (HIP 5.2)"
    )
    assert all("has no HIP equivalent (HIP 5.2" in d.reason for d in tr.diagnostics if d.code == UNMAPPED_API)
    deprecated = next(d for d in tr.diagnostics if d.construct == "cudaMemcpyToArray")
    assert deprecated.severity == Severity.WARNING and "deprecated" in deprecated.reason
    assert "hipMemcpyToArray(" in tr.text


def test_an_unmapped_name_inside_a_kernel_is_an_error_and_a_defined_one_is_the_users() -> None:
    src = (
        "__global__ void k(int* x) { x[0] = cudaFancyDeviceThing(1); }\n"
        "static int cudaMyHelper(int v) { return v; }\n"
        "int main() { return cudaMyHelper(2); }\n"
    )
    tr = translate_to_hip(src, "k.cu")
    errors = [d for d in tr.diagnostics if d.code == UNMAPPED_API]
    assert [(d.line, d.construct, d.severity) for d in errors] == [
        (1, "cudaFancyDeviceThing", Severity.ERROR)
    ]
    assert "// porter: cudaFancyDeviceThing has no HIP equivalent (HIP 5.2)" in tr.text
    assert "cudaMyHelper has no" not in tr.text
    assert tr.kernels[0].untranslatable


def _porter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.integration
def test_port_strict_fails_on_unmapped_names(tmp_path: Path) -> None:
    shutil.copy(GOLDEN / "api_unmapped.cu", tmp_path / "p.cu")
    (tmp_path / "p.cu").write_text(
        (tmp_path / "p.cu").read_text() + "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    )
    loose = _porter("port", "p.cu", "--to", "hip", "--translate-only", "--out", "loose", cwd=tmp_path)
    assert loose.returncode == 0, loose.stderr
    assert "has no HIP equivalent (HIP 5.2)" in (tmp_path / "loose" / "p.hip").read_text()
    assert "cudaInitDevice" in (tmp_path / "loose" / "diagnostics.txt").read_text()
    strict = _porter(
        "port", "p.cu", "--to", "hip", "--translate-only", "--strict", "--out", "s", cwd=tmp_path
    )
    assert strict.returncode == 1, strict.stderr
    assert "--strict" in strict.stderr and "p.cu:15: cudaInitDevice" in strict.stderr
    assert "Traceback" not in strict.stderr
    clean = tmp_path / "clean.cu"
    clean.write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    ok = _porter(
        "port", "clean.cu", "--to", "hip", "--translate-only", "--strict", "--out", "c", cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr


# every golden output but those not_building.toml names; fp16_bf16 and defines use HIP names newer than HIP 5.2,
# which porter's fallback headers (include_amd) give
NOT_BUILDING = tomllib.loads((GOLDEN / "not_building.toml").read_text())["amd"]
BUILDING = sorted(p.name for p in GOLDEN.glob("*.hip") if p.name not in NOT_BUILDING)


def _amd_syntax_check(compiler: str) -> list[str]:
    """The command that checks a HIP file's host and device code for AMD (with porter's fallback headers)."""
    if compiler == "hipcc":
        hipcc = shutil.which("hipcc")
        if hipcc is None:
            pytest.skip("hipcc not installed")
        return [hipcc, "--offload-arch=gfx90a", "-x", "hip", "-fsyntax-only", f"-I{amd_include_dir()}"]
    from porter.backends.hip import amd

    clang, rocm = amd.clang_path(), amd.rocm_path()
    if clang is None or rocm is None:
        pytest.skip("no clang for gfx942 (clang-19) or no ROCm headers")
    return [
        clang,
        "-x",
        "hip",
        "--offload-arch=gfx942",
        f"--rocm-path={rocm}",
        "-nogpulib",
        "-fsyntax-only",
    ] + [f"-I{amd_include_dir()}"]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("compiler", ["hipcc", "clang"])
def test_every_golden_translation_compiles_for_amd(compiler: str, tmp_path: Path) -> None:
    assert len(BUILDING) >= 25 and {"api_driver.hip", "api_graphs_cuda12.hip", "fp16_bf16.hip"} <= set(
        BUILDING
    )
    cmd = _amd_syntax_check(compiler)
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    failed: dict[str, str] = {}
    for name in BUILDING:
        copy = tmp_path / name
        copy.write_text((GOLDEN / name).read_text())
        done = subprocess.run(
            [*cmd, str(copy)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path
        )
        if done.returncode != 0:
            failed[name] = done.stderr[-1500:]
    assert not failed, failed
    for name in NOT_BUILDING:  # the list stays honest: what it names still fails
        copy = tmp_path / name
        copy.write_text((GOLDEN / name).read_text())
        done = subprocess.run(
            [*cmd, str(copy)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path
        )
        assert done.returncode != 0, f"{name} builds now: drop it from not_building.toml"
