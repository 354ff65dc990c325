"""porter_opencl.h keeps each .cl's binary for the device in the folder PORTER_OPENCL_CACHE names, so an OpenCL
program's later runs load it instead of compiling the OpenCL C again (Intel's CPU runtime spent 20 s of each of
reduction's ten runs compiling its 200 kernels).  A binary from another source, other options or a damaged
file is never used: the program builds from source again, and prints the same.  Porter's runs of one build
share such a folder, emptied once per run of porter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fakes.programs import run_porter

PROGRAM = r"""#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(const float* x, float* out, float by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = by * x[i] + 1.0f;
}

int main() {
    const int n = 256;
    float hx[n], ho[n];
    for (int i = 0; i < n; ++i) hx[i] = 0.5f * i;
    float *dx, *dout;
    cudaMalloc(&dx, sizeof hx);
    cudaMalloc(&dout, sizeof ho);
    cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
    scale<<<(n + 63) / 64, 64>>>(dx, dout, 3.0f, n);
    cudaMemcpy(ho, dout, sizeof ho, cudaMemcpyDeviceToHost);
    float sum = 0;
    for (int i = 0; i < n; ++i) sum += ho[i];
    printf("sum %.3f first %.3f last %.3f\n", sum, ho[0], ho[n - 1]);
    return 0;
}
"""
PRINTED = "sum 49216.000 first 1.000 last 383.500\n"


def _cpu_devices() -> list[Any]:
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    if not shutil.which("g++"):
        pytest.skip("g++ is not installed")
    from porter.backends import get_backend

    cpus = [d for d in get_backend("opencl").devices() if d.kind == "cpu"]
    if not cpus:
        pytest.skip("no CPU OpenCL device (apt-get install pocl-opencl-icd)")
    return cpus


def _cpu_device() -> Any:
    return _cpu_devices()[0]


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.cu").write_text(PROGRAM, encoding="utf-8")
    return src


def _built(tmp_path: Path, device: Any, tree: Path | None = None) -> tuple[str, dict[str, str]]:
    """The program ported to OpenCL (or `tree`, its port) and built with porter_opencl.h for `device`: its
    executable, its env."""
    from porter.backends.opencl.program import program_toolchains
    from porter.backends.programs import ProgramSource

    tree = tree or _port(tmp_path)
    chain = next(c for c in program_toolchains([device]))
    where = tmp_path / f"build-{chain.name}"
    built = chain.build(ProgramSource(tree, ("main.cu",), language="opencl", capture=False), where)
    assert built.ok, built.reason + built.log[-3000:]
    icd = {
        k: v for k, v in os.environ.items() if k in ("OCL_ICD_VENDORS", "OCL_ICD_FILENAMES", "POCL_DEVICES")
    }
    return built.executables["main.cu"], {
        **icd,
        **built.env,
        "PORTER_OPENCL_VERBOSE": "1",
        "PATH": "/usr/bin:/bin",
    }


def _port(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    r = run_porter(tmp_path, "port", str(_source(tmp_path)), "--to", "opencl", "--out", str(out))
    tree = out / "opencl"
    assert (tree / "main.cl").is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    return tree


def _run(exe: str, env: dict[str, str]) -> tuple[str, str]:
    """What the program printed, and what porter's runtime said of main.cl: "built" or "loaded"."""
    ran = subprocess.run([exe], capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    built = "building main.cl with options" in ran.stderr
    loaded = "main.cl loaded from" in ran.stderr
    assert built != loaded, ran.stderr
    return ran.stdout, "built" if built else "loaded"


@pytest.mark.integration
@pytest.mark.parametrize("which", [0, 1], ids=["first-cpu-runtime", "second-cpu-runtime"])
def test_a_later_run_loads_the_binary_and_prints_the_same(tmp_path: Path, which: int) -> None:
    devices = _cpu_devices()
    if which >= len(devices):
        pytest.skip("one CPU OpenCL runtime here (Intel's: pip install intel-opencl-rt)")
    exe, env = _built(tmp_path, devices[which])
    assert _run(exe, env) == (PRINTED, "built")  # no folder named: built each time, nothing kept
    assert _run(exe, env) == (PRINTED, "built")
    cache = tmp_path / "kept"
    cache.mkdir()
    env = {**env, "PORTER_OPENCL_CACHE": str(cache)}
    assert _run(exe, env) == (PRINTED, "built")
    kept = sorted(cache.iterdir())
    assert len(kept) == 1 and kept[0].suffix == ".clbin" and kept[0].stat().st_size > 0, kept
    assert _run(exe, env) == (PRINTED, "loaded")
    assert _run(exe, env) == (PRINTED, "loaded")
    # other build options are another binary: built again, and kept beside the first
    other = {**env, "PORTER_OPENCL_OPTIONS": ""}
    assert _run(exe, other) == (PRINTED, "built")
    assert len(list(cache.iterdir())) == 2
    assert _run(exe, other) == (PRINTED, "loaded")


@pytest.mark.integration
def test_a_damaged_binary_is_built_from_source_again(tmp_path: Path) -> None:
    exe, env = _built(tmp_path, _cpu_device())
    cache = tmp_path / "kept"
    cache.mkdir()
    env = {**env, "PORTER_OPENCL_CACHE": str(cache)}
    assert _run(exe, env) == (PRINTED, "built")
    (kept,) = cache.iterdir()
    good = kept.read_bytes()
    header, binary = good[:24], good[24:]
    assert header[:8] == b"PORTERCL" and int.from_bytes(header[8:16], "little") == len(binary)
    flipped = bytearray(good)
    flipped[24 + len(binary) // 2] ^= 0xFF
    # empty, not one, cut short, a byte of the binary changed, a binary without its header
    for damaged in (b"", b"not a binary" * 50, good[: len(good) // 3], bytes(flipped), binary):
        kept.write_bytes(damaged)
        assert _run(exe, env) == (PRINTED, "built"), damaged[:20]
        assert kept.read_bytes() == good  # replaced by the build's own binary
    assert _run(exe, env) == (PRINTED, "loaded")


@pytest.mark.integration
def test_an_unwritable_folder_only_costs_the_build(tmp_path: Path) -> None:
    exe, env = _built(tmp_path, _cpu_device())
    missing = tmp_path / "no" / "such" / "folder"
    env = {**env, "PORTER_OPENCL_CACHE": str(missing)}
    assert _run(exe, env) == (PRINTED, "built")
    assert _run(exe, env) == (PRINTED, "built")
    assert not missing.exists()


@pytest.mark.integration
def test_porters_runs_of_one_build_share_a_folder_emptied_once_per_run_of_porter(tmp_path: Path) -> None:
    device = _cpu_device()
    from porter.backends.opencl.program import program_toolchains

    chain = next(c for c in program_toolchains([device]))
    src = _source(tmp_path)
    out = tmp_path / "out"
    args = [
        "port",
        str(src),
        "--to",
        "opencl",
        "--toolchains",
        f"cpu-runtime,{chain.name}",
        "--out",
        str(out),
    ]
    r = run_porter(tmp_path, *args, "--run", "", "--run", "again", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    assert doc["program"]["verdicts"]["opencl"]["status"] == "matches", doc["program"]["verdicts"]
    folder = out / "build" / "opencl" / chain.name / "run-cache"
    kept = sorted(p.name for p in folder.iterdir())
    assert len(kept) == 1 and kept[0].endswith(".clbin"), kept  # two runs, one build of main.cl
    # what an earlier run of porter left is never read: the next one empties the folder before its runs
    planted = folder / "planted.clbin"
    planted.write_bytes(b"left by someone")
    r = run_porter(tmp_path, *args, "--run", "", "--run", "again", "--run", "third", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    assert json.loads(r.stdout)["program"]["verdicts"]["opencl"]["status"] == "matches"
    assert not planted.exists()
    assert [p.suffix for p in folder.iterdir()] == [".clbin"]
