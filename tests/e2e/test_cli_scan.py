"""`porter scan` end to end: the JSON contract, the tables, exit codes, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"


def porter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def test_json_contract() -> None:
    proc = porter(
        "scan", "--json", str(FIXTURES / "host.cu"), str(FIXTURES / "hazards" / "removed-api_pos.cu")
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) >= {"files", "errors"}
    first = doc["files"][0]
    assert set(first) >= {
        "path",
        "language",
        "kernels",
        "launches",
        "allocations",
        "loops",
        "hazards",
        "copies",
        "defines",
        "device_functions",
        "warnings",
        "assignments",
    }
    kernel = first["kernels"][0]
    assert set(kernel) >= {
        "name",
        "line",
        "params",
        "template_params",
        "shared",
        "barriers",
        "atomics",
        "warp_intrinsics",
        "launch_bounds",
    }
    assert set(kernel["params"][0]) == {"name", "type", "pointer", "const", "written"}
    assert set(first["launches"][0]) >= {"kernel", "line", "grid", "block", "shared_bytes", "stream", "args"}
    assert set(first["allocations"][0]) >= {"var", "bytes", "line"}
    hazard = doc["files"][1]["hazards"][0]
    assert set(hazard) >= {"code", "line", "message"}
    assert first["kernels"][0]["name"] == "scale"
    assert first["launches"][0]["args"] == ["d_x", "alpha", "n"]


def test_tables_by_default() -> None:
    proc = porter("scan", str(FIXTURES / "hazards" / "full-warp-mask_pos.cu"))
    assert proc.returncode == 0, proc.stderr
    assert "kernels" in proc.stdout and "portability hazards" in proc.stdout
    assert "full-warp-mask" in proc.stdout


def test_missing_path_exit_2_one_line() -> None:
    proc = porter("scan", "does/not/exist.cu")
    assert proc.returncode == 2
    assert "does/not/exist.cu" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_no_arguments_exit_2() -> None:
    proc = porter("scan")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_binary_file_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "blob.cu"
    path.write_bytes(b"\x00\x01\x02garbage")
    proc = porter("scan", "--json", str(path))
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["errors"]
    assert "blob.cu" in proc.stderr and "binary" in proc.stderr and "Traceback" not in proc.stderr


def test_syntax_error_is_a_warning_not_a_failure() -> None:
    proc = porter("scan", "--json", str(FIXTURES / "syntax_error.cu"))
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert [k["name"] for k in doc["files"][0]["kernels"]] == ["good_before", "broken", "good_after"]
    assert "syntax_error.cu:5:" in proc.stderr and "warning" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_directory_with_a_bad_file_still_scans_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text("__global__ void a(float* x) { x[0] = 1; }\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.cuh").write_text("__device__ float b(float x) { return x; }\n")
    (tmp_path / "sub" / "c.cu").write_bytes(b"\xff\xfe\x00")
    proc = porter("scan", "--json", str(tmp_path))
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert sorted(Path(f["path"]).name for f in doc["files"]) == ["a.cu", "b.cuh"]
    assert any("c.cu" in e for e in doc["errors"])


def test_json_is_one_line_when_piped_and_jobs_do_not_change_it() -> None:
    one = porter("scan", "--json", "-j", "1", str(ROOT / "samples"), str(FIXTURES))
    many = porter("scan", "--json", "--jobs", "2", str(ROOT / "samples"), str(FIXTURES))
    assert one.returncode == 0 and many.returncode == 0, one.stderr + many.stderr
    assert one.stdout.count("\n") == 1 and one.stdout == many.stdout
    assert len(json.loads(one.stdout)["files"]) > 20


def test_include_dirs_resolve_qualifier_macros() -> None:
    kernels = FIXTURES / "macros" / "kernels.cu"
    plain = json.loads(porter("scan", "--json", str(kernels)).stdout)
    found = json.loads(
        porter("scan", "--json", "-I", str(FIXTURES / "macros" / "include"), str(kernels)).stdout
    )
    names = [k["name"] for k in found["files"][0]["kernels"]]
    assert names == ["scale", "fill", "twice", "cubes", "hidden"]
    assert [k["name"] for k in plain["files"][0]["kernels"]] == names[:-1]


def test_bad_jobs_value_is_a_usage_error() -> None:
    proc = porter("scan", "-j", "-3", str(FIXTURES / "host.cu"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
