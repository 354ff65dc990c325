"""Bad input is a one-line error naming the file and exit 2, never exit 3, a traceback or a hang: special
files (FIFOs, devices) as inputs or headers, files over the size cap, deep nesting, huge sizes, bad specs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
TIMEOUT = 120  # a FIFO read would hang until then

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")

KERNEL = """__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * x[i];
}
"""


def porter(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def assert_bad_input(proc: subprocess.CompletedProcess[str], path: Path | str, *words: str) -> str:
    """Exit 2, no traceback, and one `porter: PATH...: why` line holding ``words``; that line."""
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "internal error" not in out, out
    assert proc.returncode == 2, out
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"porter: {path}")]
    assert lines, proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def _vector_add(dest: Path) -> Path:
    shutil.copy2(SAMPLES / "vector_add.cu", dest / "vector_add.cu")
    shutil.copy2(SAMPLES / "common.cuh", dest / "common.cuh")
    return dest / "vector_add.cu"


# --------------------------------------------------------------------------- special files


@needs_fifo
@pytest.mark.parametrize(
    "command",
    [
        ["scan", "{fifo}"],
        ["port", "{fifo}", "--translate-only"],
        ["bench", "{fifo}"],
        ["check", "{fifo}", "--against", "{good}"],
        ["check", "{good}", "--against", "{fifo}"],
    ],
    ids=["scan", "port", "bench", "check-variant", "check-original"],
)
def test_fifo_input_is_refused_quickly(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "pipe.cu"
    os.mkfifo(fifo)
    good = _vector_add(tmp_path)
    args = [a.replace("{fifo}", str(fifo)).replace("{good}", str(good)) for a in command]
    assert_bad_input(porter(*args), fifo, "not a regular file", "FIFO")


@needs_dev_zero
@pytest.mark.parametrize("command", [["scan"], ["port", "--translate-only"]], ids=["scan", "port"])
def test_dev_zero_input(command: list[str]) -> None:
    proc = porter(command[0], "/dev/zero", *command[1:])
    assert_bad_input(proc, "/dev/zero", "not a regular file", "character device")


@needs_fifo
def test_scan_of_a_folder_with_a_fifo_scans_the_rest(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.cu")
    (tmp_path / "ok.cu").write_text(KERNEL)
    proc = porter("scan", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"porter: {tmp_path / 'pipe.cu'}: not a regular file" in proc.stderr
    assert "scale" in proc.stdout


@needs_dev_zero
def test_include_of_dev_zero(tmp_path: Path) -> None:
    src = tmp_path / "inc.cu"
    src.write_text('#include "/dev/zero"\n' + KERNEL)
    line = assert_bad_input(porter("port", str(src), "--translate-only"), f"{src}:1", '#include "/dev/zero"')
    assert "character device" in line
    scan = porter("scan", str(src))  # scan compiles nothing: a warning, and the rest is scanned
    assert scan.returncode == 0, scan.stderr
    assert f'porter: warning: {src}:1: #include "/dev/zero": header /dev/zero skipped' in scan.stderr


@needs_fifo
def test_include_of_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.cuh")
    src = tmp_path / "inc.cu"
    src.write_text('#include <cstdio>\n#include "pipe.cuh"\n' + KERNEL)
    for command in (["port", str(src), "--translate-only"], ["bench", str(src)]):
        assert_bad_input(porter(*command), f"{src}:2", '#include "pipe.cuh"', "FIFO")
    scan = porter("scan", str(src))
    assert scan.returncode == 0 and "porter: warning:" in scan.stderr, scan.stderr


# --------------------------------------------------------------------------- size cap


def test_input_over_the_size_cap(tmp_path: Path) -> None:
    src = tmp_path / "big.cu"
    src.write_text(KERNEL + "// padding\n" * 200)
    env = {"PORTER_MAX_INPUT_BYTES": "1000"}
    for command in (["scan", str(src)], ["port", str(src), "--translate-only"]):
        assert_bad_input(porter(*command, env=env), src, "too large", "PORTER_MAX_INPUT_BYTES")
    assert porter("scan", str(src)).returncode == 0  # under the default 16 MiB


def test_header_over_the_size_cap_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "big.cuh").write_text("#define SCALE 2.0f\n" + "// padding\n" * 200)
    src = tmp_path / "k.cu"
    src.write_text('#include "big.cuh"\n' + KERNEL)
    proc = porter("port", str(src), "--to", "hip", "--translate-only", env={"PORTER_MAX_INPUT_BYTES": "1000"})
    assert proc.returncode == 0, proc.stderr
    assert "porter: warning:" in proc.stderr and "too large" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_size_cap_setting(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    proc = porter("scan", str(src), env={"PORTER_MAX_INPUT_BYTES": "lots"})
    assert proc.returncode == 2 and "PORTER_MAX_INPUT_BYTES must be a positive number" in proc.stderr


# --------------------------------------------------------------------------- nesting


def _deep_program(tmp_path: Path, body: str) -> Path:
    src = tmp_path / "deep.cu"
    src.write_text(
        "__global__ void k(float *x) { x[threadIdx.x] = " + body + "; }\n"
        "int main() { float *x; cudaMalloc(&x, 256 * sizeof(float)); k<<<1, 256>>>(x); return 0; }\n"
    )
    return src


@pytest.mark.parametrize(
    "body",
    ["(" * 5000 + "1" + ")" * 5000, "-" * 5000 + "1", "+".join(["1"] * 5000)],
    ids=["parentheses", "unary", "sum"],
)
def test_deep_expressions(tmp_path: Path, body: str) -> None:
    src = _deep_program(tmp_path, body)
    proc = porter("port", str(src), "--translate-only", "--out", str(tmp_path / "out"))
    assert_bad_input(proc, src, "too deeply nested")


def test_deep_blocks(tmp_path: Path) -> None:
    src = tmp_path / "deep.cu"
    src.write_text("__global__ void k(float *x) " + "{" * 5000 + "x[0] = 1;" + "}" * 5000 + "\n")
    proc = porter("port", str(src), "--translate-only", "--out", str(tmp_path / "out"))
    assert_bad_input(proc, src, "too deeply nested")
    assert porter("scan", str(src)).returncode == 0  # the scanner walks it


def test_deep_kernel_in_bench(tmp_path: Path) -> None:
    src = _deep_program(tmp_path, "(" * 5000 + "1" + ")" * 5000)
    assert_bad_input(porter("bench", str(src), "--backend", "cpu"), src, "too deeply nested")


def test_deep_python_is_scanned(tmp_path: Path) -> None:
    src = tmp_path / "deep.py"
    src.write_text("def f(a):\n    for i in range(3):\n        a[i] = " + "+".join(["a[i]"] * 20000) + "\n")
    proc = porter("scan", str(src))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- sizes and specs


@pytest.mark.parametrize("size", ["n=99999999999999", "n=1<<200", "n=9223372036854775808"])
def test_huge_size_option(size: str) -> None:
    proc = porter("bench", str(SAMPLES / "vector_add.cu"), "--size", size, "--backend", "cpu")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out and "internal error" not in out, out
    (line,) = [ln for ln in proc.stderr.splitlines() if "--size" in ln]
    assert line.startswith("porter: ")


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ('role = "sideways"', "role must be in, out, inout or scalar"),
        ('low = "abc"', "low: expected a number"),
        ("hidden_sizes = [{ n = 99999999999999 }]", "cannot hold 99999999999999"),
        ("template_args = 5", "template_args: expected a list"),
    ],
)
def test_malformed_spec_file(tmp_path: Path, field: str, message: str) -> None:
    src = _vector_add(tmp_path)
    arg = field if field.startswith("role") else 'role = "in"\n' + (field if field.startswith("low") else "")
    top = "" if field.startswith(("role", "low")) else field
    spec = tmp_path / "vector_add.cu.porter.toml"
    spec.write_text(
        f"""[kernels.vector_add]
grid = ["(n + 255) / 256"]
block = ["256"]
sizes = [{{ n = 4096 }}]
{top}
[[kernels.vector_add.args]]
name = "a"
dtype = "float32"
shape = ["n"]
{arg}
[[kernels.vector_add.args]]
name = "b"
role = "in"
dtype = "float32"
shape = ["n"]
[[kernels.vector_add.args]]
name = "c"
role = "out"
dtype = "float32"
shape = ["n"]
[[kernels.vector_add.args]]
name = "n"
role = "scalar"
dtype = "int32"
value = "n"
"""
    )
    assert_bad_input(porter("bench", str(src), "--backend", "cpu"), spec, message)


def test_out_path_the_system_refuses(tmp_path: Path) -> None:
    src = _vector_add(tmp_path)
    proc = porter("port", str(src), "--translate-only", "--out", str(tmp_path / ("o" * 300)))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out and "internal error" not in out, out
    assert proc.stderr.strip().splitlines()[-1].startswith("porter: ")
