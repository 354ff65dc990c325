"""`porter port DIR --to opencl --run ...`: the OpenCL port is a program, built with porter's OpenCL runtime
and run on every OpenCL device here, compared with the original (issue #30)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "tests" / "fixtures" / "programs" / "opencl_tour"
REFUSED = ROOT / "tests" / "fixtures" / "programs" / "opencl_refused"
SMOOTH = ROOT / "samples" / "programs" / "smooth"
INCLUDED = ROOT / "tests" / "fixtures" / "programs" / "included_kernel_unit"


def porter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900, cwd=ROOT
    )


def _devices() -> list[Any]:
    from porter.backends import get_backend

    return [d for d in get_backend("opencl").devices() if d.role == "runs"]


def _opencl_devices() -> list[str]:
    return [d.label for d in _devices()]


needs_opencl = pytest.mark.skipif(not shutil.which("g++"), reason="g++ is not installed")


def _port(src: Path, out: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    r = porter("port", str(src), "--to", "opencl", "--run", "", "--out", str(out), "--json", *extra)
    assert r.returncode in (0, 1), r.stderr + r.stdout[-3000:]
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


@needs_opencl
def test_the_tour_matches_the_original_on_every_cpu_opencl_device(tmp_path: Path) -> None:
    """A header's kernel reading __constant__ memory set from the host, a template kernel launched for
    float and double, dynamic shared memory, a stream with events and async copies, and launches on
    pointers into an allocation (an aligned offset: a sub-buffer; an odd one: a staged copy)."""
    devices = _opencl_devices()
    if not devices:
        pytest.skip("no OpenCL device here (apt-get install pocl-opencl-icd)")
    src = tmp_path / "tour"
    shutil.copytree(TOUR, src)
    doc = _port(src, tmp_path / "out", "-I", str(src / "include"))
    builds = [b for b in doc["program"]["build"]["programs"] if b["variant"] == "opencl"]
    assert builds and all(b["status"] == "built" for b in builds), builds
    runs = [v for run in doc["program"]["runs"] for v in run["variants"] if v["target"] == "opencl"]
    ran_on = {v["device"] for v in runs if v["status"] == "matches"}
    assert ran_on == set(devices), runs
    assert all(v["status"] == "matches" for v in runs), runs
    where = {k["name"]: (k["file"], k["line"]) for k in doc["kernels"]}
    assert where["filter"] == ("include/ops.cuh", 11) and where["axpy<float>"] == ("include/ops.cuh", 22)
    # the port is a program: host files beside the kernels, the kernels' bodies now host stubs
    out = tmp_path / "out" / "opencl"
    assert (
        (out / "main.cl").is_file()
        and (out / "main.cu").is_file()
        and (out / "include" / "ops.cuh").is_file()
    )
    header = (out / "include" / "ops.cuh").read_text()
    assert 'porter_opencl::Launch porter_launch("filter", "main.cl")' in header
    assert ".symbol(taps)" in header and ".local()" in header
    assert "if constexpr (std::is_same_v<T, float>)" in header and '"axpy_double"' in header
    assert (
        "clamp_load" not in header.split("__global__ void filter")[0].split("__constant__")[1]
    )  # device-only: gone
    assert header.count("\n") == (TOUR / "include" / "ops.cuh").read_text().count("\n")  # lines stay put


@needs_opencl
def test_a_port_that_differs_is_caught(tmp_path: Path) -> None:
    """The comparison can fail: a translated kernel planted with a wrong constant makes the OpenCL program
    differ from the original (its PASS line and its sums)."""
    if not _opencl_devices():
        pytest.skip("no OpenCL device here")
    src = tmp_path / "tour"
    shutil.copytree(TOUR, src)
    out = tmp_path / "out"
    _port(src, out, "-I", str(src / "include"))
    cl = out / "opencl" / "main.cl"
    text = cl.read_text()
    assert "a * x[i] + y[i]" in text
    cl.write_text(text.replace("a * x[i] + y[i]", "a * x[i] - y[i]"))
    # the program built from the planted tree, run by hand with porter's runtime on the first device
    from porter.backends import get_backend
    from porter.backends.opencl.program import program_toolchains
    from porter.backends.programs import ProgramSource

    chain = program_toolchains(get_backend("opencl").devices())[0]
    built = chain.build(
        ProgramSource(out / "opencl", ("main.cu",), (str(out / "opencl" / "include"),), language="opencl"),
        tmp_path / "build",
    )
    assert built.ok, built.reason + built.log[-2000:]
    exe = built.executables["main.cu"]
    ran = subprocess.run(
        [exe], capture_output=True, text=True, timeout=300, env={**built.env, "PATH": "/usr/bin"}
    )
    assert ran.returncode == 1 and "FAIL" in ran.stdout, ran.stdout + ran.stderr


@needs_opencl
def test_an_untranslatable_kernel_refuses_the_program_with_its_line(tmp_path: Path) -> None:
    if not _opencl_devices():
        pytest.skip("no OpenCL device here")
    src = tmp_path / "refused"
    shutil.copytree(REFUSED, src)
    doc = _port(src, tmp_path / "out")
    builds = [b for b in doc["program"]["build"]["programs"] if b["variant"] == "opencl"]
    assert builds and all(b["status"] == "refused" for b in builds), builds
    assert all("lane_ids" in b["reason"] and "(main.cu line 9)" in b["reason"] for b in builds), builds
    runs = [v for run in doc["program"]["runs"] for v in run["variants"] if v["target"] == "opencl"]
    assert runs and all(v["status"] == "not-run" for v in runs), runs


@needs_opencl
def test_a_kernel_in_an_included_cu_is_translated_and_matches(tmp_path: Path) -> None:
    """lavaMD's layout: a C main, a wrapper .cu that #includes a C header guarded for C++ callers and
    then the .cu defining the kernel.  The wrapper's OpenCL C holds the kernel; the included .cu's body
    is a host stub naming the wrapper's .cl."""
    if not _opencl_devices():
        pytest.skip("no OpenCL device here")
    src = tmp_path / "included"
    shutil.copytree(INCLUDED, src)
    doc = _port(src, tmp_path / "out")
    runs = [v for run in doc["program"]["runs"] for v in run["variants"] if v["target"] == "opencl"]
    assert runs and all(v["status"] == "matches" for v in runs), runs
    out = tmp_path / "out" / "opencl" / "kernel"
    assert "__kernel void scale(" in (out / "wrapper.cl").read_text()
    assert (
        'porter_opencl::Launch porter_launch("scale", "kernel/wrapper.cl")' in (out / "scale.cu").read_text()
    )


def _assert_the_sample_matches(src: Path, out: Path) -> None:
    """The README sample (a copy at `src`) ported to OpenCL with its run: the program matches."""
    r = porter("port", str(src), "--to", "opencl", "--run", "./smooth data/values.txt 4", "--out", str(out))
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    assert "program verdict, opencl: matches" in r.stdout


@needs_opencl
def test_the_readme_sample_matches_as_an_opencl_program(tmp_path: Path) -> None:
    if not _opencl_devices():
        pytest.skip("no OpenCL device here")
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src, ignore=shutil.ignore_patterns("*.ported"))
    _assert_the_sample_matches(src, tmp_path / "o")


@needs_opencl
def test_a_program_with_its_own_unistd_h_builds_as_an_opencl_program(tmp_path: Path) -> None:
    """Rodinia's kmeans ships a Windows shim named unistd.h beside its headers, found before the system's
    through the program's include folder: porter's OpenCL runtime header includes no <unistd.h>, so the port
    still builds and matches (before, every unit failed on the shim's own missing header)."""
    if not _opencl_devices():
        pytest.skip("no OpenCL device here")
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src, ignore=shutil.ignore_patterns("*.ported"))
    (src / "include" / "unistd.h").write_text('#error "the program\'s own unistd.h"\n', encoding="utf-8")
    _assert_the_sample_matches(src, tmp_path / "o")


@needs_opencl
def test_a_device_that_cannot_run_a_launched_kernel_is_not_run_never_a_difference(tmp_path: Path) -> None:
    """shuffle_sum launches a warp reduction (__shfl_down_sync, lane 0 stores) that needs 32-wide sub-groups: on
    a device without them (PoCL), or whose 32-wide sub-groups failed porter's probe (the same reduction through
    the translation's porter_shuffle_down), the kernel is left out of the port's build and the run stops saying
    so -- not-run on that device, with the requirement named; a device that has them (porter's probe granted
    size 32: Intel's CPU runtime here, through intel_sub_group_shuffle_down) runs it and must match."""
    from porter.backends.opencl import device_supports

    doc = _port(ROOT / "tests" / "fixtures" / "programs" / "shuffle_sum", tmp_path / "out", "--toolchains",
                "cpu-runtime,opencl")  # fmt: skip
    variants = [v for run in doc["program"]["runs"] for v in run["variants"] if v["target"] == "opencl"]
    assert variants and {v["device"] for v in variants} == set(_opencl_devices()) - {"opencl:oclgrind"}
    granted = {d.label for d in _devices() if device_supports(d, "reqd_sub_group_size_32")}
    for v in variants:
        if v["device"] in granted:
            assert v["status"] == "matches", v
            continue
        assert v["status"] == "not-run", v
        assert (
            v["reason"].startswith("kernel 'warp_sums' needs ")
            and "cl_intel_required_subgroup_size" in v["reason"]
        ), v["reason"]
    expected = "matches" if granted else "not-run"
    assert doc["program"]["verdicts"]["opencl"]["status"] == expected
    # the kernel's replay: validated where a device has what it needs, else said so -- never a failure
    rows = [r for k in doc["kernels"] for r in k["replays"] if r["variant"] == "opencl"]
    assert rows and all(
        r["status"] == "validated"
        or (
            r["status"] == "not-replayable"
            and r["reason"].startswith("no opencl device here has what it needs")
        )
        or (  # where another device judges it, each device that cannot run it has a row saying so
            granted
            and r["status"] == "not-replayable"
            and r["reason"].startswith("warp_sums needs ")
            and f"; {r['device']} " in r["reason"]
        )
        for r in rows
    ), rows
    assert {r["device"] for r in rows if r["status"] == "validated"} == granted, rows
