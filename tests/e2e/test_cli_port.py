"""`porter port FILE --to hip,opencl`: outputs, JSON schema, exit codes, and every sample ported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
VARIANT_KEYS = ["target", "path", "status", "device", "max_rel_err", "trials", "reason"]


def porter(
    *args: str, timeout: int = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=full)


def _devices(backend: str) -> list[Any]:
    from porter.backends import get_backend

    try:
        return list(get_backend(backend).devices())
    except Exception:  # noqa: BLE001
        return []


def _need_runtimes() -> None:
    if not _devices("cpu"):
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    if not any(d.kind != "checker" for d in _devices("opencl")):
        pytest.skip("no OpenCL device (PoCL) to run the OpenCL variants")


def _hipcc_reaches(arch: str) -> bool:
    from porter.backends.hip import amd

    return bool(amd.compilers_for(arch))


def _copy_sample(name: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(SAMPLES / name, dest / name)
    shutil.copy2(SAMPLES / "common.cuh", dest / "common.cuh")
    return dest / name


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def _rows(doc: dict[str, Any], kernel: str) -> list[dict[str, Any]]:
    found = [k for k in doc["kernels"] if k["name"] == kernel]
    assert found, f"no kernel {kernel} in {[k['name'] for k in doc['kernels']]}"
    return found[0]["variants"]


# --------------------------------------------------------------------------- vector_add, full run


@pytest.fixture(scope="module")
def vector_add_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _need_runtimes()
    src_dir = tmp_path_factory.mktemp("va-src")
    src = _copy_sample("vector_add.cu", src_dir)
    before = _snapshot(src_dir)
    out = tmp_path_factory.mktemp("va-out") / "ported"
    res = porter("port", str(src), "--to", "hip,opencl", "--out", str(out), "--json", "--trials", "1")
    return {"res": res, "src_dir": src_dir, "before": before, "out": out}


def test_vector_add_validated_on_emulator_and_pocl(vector_add_run: dict[str, Any]) -> None:
    res = vector_add_run["res"]
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    rows = _rows(doc, "vector_add")
    by = {(r["target"], r["device"]): r for r in rows}
    assert by[("hip", "cpu:cpu-emulator")]["status"] == "validated"
    pocl = [
        r
        for r in rows
        if r["target"] == "opencl" and r["device"].startswith("opencl:") and "oclgrind" not in r["device"]
    ]
    assert pocl and all(r["status"] == "validated" for r in pocl), pocl
    for r in rows:
        if r["status"] == "validated":
            assert r["trials"] >= 1 and r["max_rel_err"] is not None and r["max_rel_err"] <= 1e-5
    if _hipcc_reaches("gfx90a"):
        assert by[("hip", "hip:gfx90a")]["status"] == "compiled"
    if _hipcc_reaches("gfx942"):
        assert by[("hip", "hip:gfx942")]["status"] == "compiled"
    assert all(r["status"] in ("validated", "compiled") for r in rows), rows


def test_json_schema_is_exact(vector_add_run: dict[str, Any]) -> None:
    doc = json.loads(vector_add_run["res"].stdout)
    assert list(doc) == ["source", "kernels"]
    assert doc["source"].endswith("vector_add.cu")
    assert [list(k) for k in doc["kernels"]] == [["name", "variants"]]
    for row in doc["kernels"][0]["variants"]:
        assert list(row) == VARIANT_KEYS
        assert row["status"] in ("validated", "compiled", "failed", "untranslatable")
        assert isinstance(row["trials"], int) and isinstance(row["reason"], str)
        assert Path(row["path"]).suffix == {"hip": ".hip", "opencl": ".cl"}[row["target"]]


def test_outputs_written_and_input_untouched(vector_add_run: dict[str, Any]) -> None:
    out: Path = vector_add_run["out"]
    assert _snapshot(vector_add_run["src_dir"]) == vector_add_run["before"]
    names = {p.name for p in out.iterdir()}
    assert {"vector_add.hip", "vector_add.cl", "common.cuh", "report.json", "diagnostics.txt"} <= names
    assert "hipMalloc" in (out / "vector_add.hip").read_text()
    assert "__kernel" in (out / "vector_add.cl").read_text()
    assert "cudaError_t" not in (out / "common.cuh").read_text()  # the header is translated too
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is True and report["exit_code"] == 0
    assert report["kernels"] == [
        {
            **k,
            "variants": [
                # the --json row, its toolchain and logs, and what a re-run's ledger finds it by
                {key: v[key] for key in (*VARIANT_KEYS, "toolchain", "logs", "key", "file_sha")}
                for v in k["variants"]
            ],
        }
        for k in report["kernels"]
    ]


def test_summary_table_on_stdout(tmp_path: Path) -> None:
    src = _copy_sample("vector_add.cu", tmp_path / "src")
    res = porter("port", str(src), "--to", "opencl", "--translate-only")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "vector_add" in res.stdout and "translated" in res.stdout
    assert not res.stdout.lstrip().startswith("{")


# --------------------------------------------------------------------------- outputs and options


def test_translate_only_default_out_beside_input(tmp_path: Path) -> None:
    src = _copy_sample("vector_add.cu", tmp_path / "src")
    before = _snapshot(src.parent)
    res = porter("port", str(src), "--to", "hip,opencl", "--translate-only", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    out = src.parent / "vector_add.ported"
    assert (out / "vector_add.hip").is_file() and (out / "vector_add.cl").is_file()
    assert (out / "common.cuh").is_file() and (out / "diagnostics.txt").is_file()
    after = {k: v for k, v in _snapshot(src.parent).items() if not k.startswith(str(out))}
    assert after == before
    doc = json.loads(res.stdout)
    rows = _rows(doc, "vector_add")
    assert {r["target"] for r in rows} == {"hip", "opencl"}
    assert all(r["status"] == "translated" and r["device"] == "" for r in rows)


def test_out_in_input_folder_refuses_to_overwrite(tmp_path: Path) -> None:
    src = _copy_sample("vector_add.cu", tmp_path)
    before = _snapshot(tmp_path)
    res = porter("port", str(src), "--to", "hip", "--translate-only", "--out", str(tmp_path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "overwrite" in res.stderr and "Traceback" not in res.stderr
    assert _snapshot(tmp_path) == before


def test_include_dir_in_another_folder(tmp_path: Path) -> None:
    _need_runtimes()
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "scale_defs.h").write_text("#pragma once\n#define SCALE 3.0f\n#define THREADS 128\n")
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    src = src_dir / "scale.cu"
    src.write_text(
        '#include <cstdio>\n#include "scale_defs.h"\n\n'
        "__global__ void scale(const float* x, float* y, int n)\n{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = SCALE * x[i] + 1.0f;\n}\n\n"
        "int main()\n{\n    int n = 100000;\n    size_t bytes = n * sizeof(float);\n"
        "    float *d_x, *d_y;\n    cudaMalloc(&d_x, bytes);\n    cudaMalloc(&d_y, bytes);\n"
        "    float* h_x = (float*)malloc(bytes);\n"
        "    cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice);\n"
        "    scale<<<(n + THREADS - 1) / THREADS, THREADS>>>(d_x, d_y, n);\n"
        "    cudaMemcpy(h_x, d_y, bytes, cudaMemcpyDeviceToHost);\n    return 0;\n}\n"
    )
    out = tmp_path / "out"
    res = porter(
        "port",
        str(src),
        "--to",
        "hip,opencl",
        "-I",
        str(inc),
        "--out",
        str(out),
        "--json",
        "--trials",
        "1",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    rows = _rows(json.loads(res.stdout), "scale")
    assert any(r["target"] == "hip" and r["status"] == "validated" for r in rows), rows
    assert any(r["target"] == "opencl" and r["status"] == "validated" for r in rows), rows
    assert "3.0f" in (out / "scale.cl").read_text() or "SCALE" in (out / "scale.cl").read_text()
    assert (out / "scale_defs.h").is_file()  # the header translated beside the HIP output
    assert (inc / "scale_defs.h").read_text().startswith("#pragma once\n#define SCALE 3.0f")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["does/not/exist.cu"], id="missing-file"),
        pytest.param(["{py}"], id="not-cuda"),
        pytest.param(["{cu}", "--to", "metal"], id="unknown-target"),
        pytest.param(["{cu}", "-I", "no/such/dir"], id="missing-include-dir"),
        pytest.param(["{empty}"], id="no-kernels"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str]) -> None:
    py = tmp_path / "loops.py"
    py.write_text("def f(x):\n    for i in range(len(x)):\n        x[i] += 1\n")
    empty = tmp_path / "host_only.cu"
    empty.write_text("int main() { return 0; }\n")
    cu = _copy_sample("vector_add.cu", tmp_path / "src")
    subst = {"{py}": str(py), "{cu}": str(cu), "{empty}": str(empty)}
    res = porter("port", *[subst.get(a, a) for a in args], "--translate-only")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr.strip(), "an error message is expected on stderr"


def test_a_texture_kernel_alone_is_not_validated_exit_1_other_kernel_validates(tmp_path: Path) -> None:
    _need_runtimes()
    res = porter(
        "port",
        str(SAMPLES / "legacy_texture.cu"),
        "--out",
        str(tmp_path / "out"),
        "--json",
        "--trials",
        "1",
    )
    assert res.returncode == 1, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    tex = _rows(doc, "scale_tex")
    assert {r["target"] for r in tex} == {"hip", "opencl"}
    # HIP and OpenCL alike: the texture is a pointer and a size (OpenCL: two kernel arguments); alone (no
    # --run), nothing binds it, so nothing validates the kernel -- and the OpenCL rows say what is missing
    for target in ("hip", "opencl"):
        rows = [r for r in tex if r["target"] == target]
        assert rows and not any(r["status"] in ("untranslatable", "validated") for r in rows), rows
    opencl_devices = [r for r in tex if r["target"] == "opencl" and r["device"].startswith("opencl:")]
    assert any("texture reference 'tex_in'" in r["reason"] for r in opencl_devices), tex
    plain = _rows(doc, "saxpy_plain")
    for target in ("hip", "opencl"):
        assert any(r["target"] == target and r["status"] == "validated" for r in plain), plain
    assert all(r["status"] in ("validated", "compiled") for r in plain), plain


# --------------------------------------------------------------------------- every sample


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.cu"))
QUICK = {"vector_add.cu", "legacy_texture.cu"}  # run above already


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in SAMPLE_FILES if n not in QUICK])
def test_every_sample_ports_and_validates(tmp_path: Path, name: str) -> None:
    _need_runtimes()
    res = porter("port", str(SAMPLES / name), "--out", str(tmp_path / "out"), "--json", "--trials", "1")
    assert res.returncode in (0, 1), res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["kernels"], doc
    unmet: list[str] = []  # (kernel, target)s that no device here has what they need for
    for kernel in doc["kernels"]:
        rows = kernel["variants"]
        if any(r["status"] == "untranslatable" and not r["device"] for r in rows):
            continue  # untranslatable as a kernel (the legacy texture sample)
        for target in ("hip", "opencl"):
            mine = [r for r in rows if r["target"] == target]
            assert mine, f"{kernel['name']}: no {target} variant"
            # A device lacking what the kernel needs (sub-groups) says so; it never fails.
            lacking = [r for r in mine if r["status"] == "untranslatable"]
            assert all(r["device"] and " needs " in r["reason"] for r in lacking), lacking
            bad = [r for r in mine if r["status"] not in ("validated", "compiled", "untranslatable")]
            assert not bad, f"{kernel['name']} {target}: " + "; ".join(
                f"{r['device']}: {r['reason']}" for r in bad
            )
            if len(lacking) == len(mine):
                unmet.append(f"{kernel['name']} ({target}): {lacking[0]['reason']}")
                continue
            assert any(r["status"] == "validated" for r in mine), (
                f"{kernel['name']} {target}: not validated anywhere"
            )
    if unmet:
        assert res.returncode == 1, res.stdout + res.stderr
        pytest.skip("no device here can run " + "; ".join(unmet))
    assert res.returncode == 0, res.stdout + res.stderr


def test_warp_shuffles_validate_on_32_wide_subgroups_untranslatable_elsewhere(tmp_path: Path) -> None:
    """reduce_shfl (32-lane shuffles and lane arithmetic) validates on OpenCL devices that can
    require 32-wide sub-groups (Intel's CPU runtime) and is untranslatable, with the reason, on
    every other OpenCL device (PoCL, Oclgrind, NVIDIA); HIP validates on the emulator."""
    _need_runtimes()
    from porter.backends.opencl import missing_requirements
    from porter.backends.opencl.translate import translate_to_opencl

    src = SAMPLES / "reduce_shfl.cu"
    requires = translate_to_opencl(src.read_text(), str(src)).kernels[0].requires
    assert "reqd_sub_group_size_32" in requires and "subgroup_shuffle_relative" in requires
    res = porter(
        "port", str(src), "--to", "hip,opencl", "--out", str(tmp_path / "out"), "--json", "--trials", "1"
    )
    rows = _rows(json.loads(res.stdout), "reduce_sum")
    assert any(
        r["target"] == "hip" and r["device"] == "cpu:cpu-emulator" and r["status"] == "validated"
        for r in rows
    ), rows
    ocl = {r["device"]: r for r in rows if r["target"] == "opencl"}
    devices = {d.label: d for d in _devices("opencl")}
    assert set(ocl) == set(devices), (ocl, devices)
    able = [label for label, d in devices.items() if not missing_requirements(d, requires)]
    for label, row in ocl.items():
        if label in able:
            assert row["status"] == "validated" and row["max_rel_err"] <= 5e-4, row
        else:
            assert row["status"] == "untranslatable", row
            assert row["reason"].startswith("reduce_sum needs "), row
            assert "cl_intel_required_subgroup_size" in row["reason"] and label in row["reason"], row
    assert res.returncode == (0 if able else 1), res.stdout + res.stderr
    if not able:
        pytest.skip("no OpenCL device here has 32-wide sub-groups (pip install intel-opencl-rt)")


# --------------------------------------------------------------------------- the GPU


@pytest.mark.gpu
def test_vector_add_on_nvidia_gpu(tmp_path: Path) -> None:
    res = porter(
        "port", str(SAMPLES / "vector_add.cu"), "--out", str(tmp_path / "out"), "--json", "--trials", "1"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    rows = _rows(json.loads(res.stdout), "vector_add")
    gpu_hip = [
        r
        for r in rows
        if r["target"] == "hip" and r["device"].startswith("hip:") and "gfx" not in r["device"]
    ]
    assert gpu_hip and all(r["status"] == "validated" for r in gpu_hip), rows
    nv_ocl = [r for r in rows if r["target"] == "opencl" and "NVIDIA" in r["device"]]
    assert nv_ocl and all(r["status"] == "validated" for r in nv_ocl), rows


def _port_macro_fixture(
    tmp_path: Path, program: str, header: str, out: Path
) -> subprocess.CompletedProcess[str]:
    """`porter port --json` of a program of tests/fixtures/cuda/macros, copied with its header."""
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    for name in (program, header):
        shutil.copy2(ROOT / "tests" / "fixtures" / "cuda" / "macros" / name, src_dir / name)
    return porter("port", str(src_dir / program), "--out", str(out), "--json", "--trials", "1")


def test_kernels_declared_through_qualifier_macros_port_and_validate(tmp_path: Path) -> None:
    """`KERNEL void k()` with `#define KERNEL __global__` in a local header (and a `static` one):
    HIP keeps the macros, OpenCL spells them out, and both validate against the original."""
    _need_runtimes()
    out = tmp_path / "out"
    res = _port_macro_fixture(tmp_path, "program.cu", "defs.cuh", out)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert [k["name"] for k in doc["kernels"]] == ["softsign_kernel", "double_in_place"]
    for kernel in doc["kernels"]:
        for target in ("hip", "opencl"):
            rows = [r for r in kernel["variants"] if r["target"] == target]
            assert any(r["status"] == "validated" for r in rows), rows
            assert all(r["status"] in ("validated", "compiled") for r in rows), rows
    hip = (out / "program.hip").read_text()
    assert "static KERNEL void double_in_place" in hip and "HOST_DEVICE inline float softsign" in hip
    cl = (out / "program.cl").read_text()
    assert "__kernel void double_in_place(__global float* data" in cl and "static __kernel" not in cl


def test_kernels_in_macro_opened_namespaces_port_and_validate(tmp_path: Path) -> None:
    """A library-style program: kernels in `LIB_NAMESPACE_BEGIN ... END`, helpers in
    `NS_BEGIN(detail)`, launched as `lib::k`.  HIP keeps the namespaces and is validated through
    the qualified name; OpenCL translates them at file scope.  The kernel that uses a C++ template
    type is untranslatable to OpenCL only: its HIP variant is still validated, and the template
    does not stop the other kernel's OpenCL build."""
    _need_runtimes()
    out = tmp_path / "out"
    res = _port_macro_fixture(tmp_path, "scoped.cu", "scoped.cuh", out)
    assert res.returncode == 1, res.stdout + res.stderr  # 1: a variant is untranslatable (below)
    doc = json.loads(res.stdout)
    rows = {k["name"]: k["variants"] for k in doc["kernels"]}
    assert list(rows) == ["affine_clamp", "square_in_place"]
    for variants in rows.values():
        hip = [r for r in variants if r["target"] == "hip"]
        assert any(r["status"] == "validated" for r in hip), hip
        assert all(r["status"] in ("validated", "compiled") for r in hip), hip
    ocl = [r for r in rows["square_in_place"] if r["target"] == "opencl"]
    assert ocl and all(r["status"] == "validated" for r in ocl), ocl
    (untranslatable,) = [r for r in rows["affine_clamp"] if r["target"] == "opencl"]
    assert untranslatable["status"] == "untranslatable" and "template" in untranslatable["reason"]
    assert "LIB_NAMESPACE_BEGIN" in (out / "scoped.hip").read_text()
    cl = (out / "scoped.cl").read_text()
    assert (
        "__kernel void square_in_place(__global float* data" in cl and "/* porter: namespace lib { */" in cl
    )


def test_hip_launch_ggl_writes_hiplaunchkernelggl_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "ggl"
    r = porter(
        "port",
        str(SAMPLES / "templated.cu"),
        "--to",
        "hip",
        "--translate-only",
        "--hip-launch",
        "ggl",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    text = (out / "templated.hip").read_text()
    assert "hipLaunchKernelGGL(HIP_KERNEL_NAME(" in text and "<<<" not in text
    default = tmp_path / "chevrons"
    assert (
        porter(
            "port", str(SAMPLES / "templated.cu"), "--to", "hip", "--translate-only", "--out", str(default)
        ).returncode
        == 0
    )
    assert "<<<" in (default / "templated.hip").read_text()
    bad = porter(
        "port",
        str(SAMPLES / "templated.cu"),
        "--to",
        "hip",
        "--hip-launch",
        "triple",
        "--out",
        str(tmp_path / "x"),
    )
    assert bad.returncode == 2 and "chevrons, ggl" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x").exists()  # refused before anything is written


def test_a_latin1_source_round_trips_byte_for_byte_and_validates(tmp_path: Path) -> None:
    _need_runtimes()
    raw = (SAMPLES / "vector_add.cu").read_bytes()
    raw = b"// Copyright \xa9 2009 Caf\xe9 Ltd.\n" + raw.replace(
        b"c[i] = a[i] + b[i];", b"c[i] = a[i] + b[i]; // \xab sum \xbb"
    )
    src = tmp_path / "vector_add.cu"
    src.write_bytes(raw)
    shutil.copy(SAMPLES / "common.cuh", tmp_path)
    out = tmp_path / "out"
    r = porter("port", str(src), "--out", str(out), "--json", "--trials", "1")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)  # valid JSON although the source is not UTF-8
    assert src.read_bytes() == raw  # the input untouched
    hip = (out / "vector_add.hip").read_bytes()
    assert b"// Copyright \xa9 2009 Caf\xe9 Ltd.\n" in hip and b"// \xab sum \xbb" in hip
    assert b"// \xab sum \xbb" in (out / "vector_add.cl").read_bytes()
    rows = [row for k in doc["kernels"] for row in k["variants"]]
    assert rows and all(row["status"] in ("validated", "compiled") for row in rows), rows
    assert any(row["target"] == "opencl" and row["status"] == "validated" for row in rows)


def test_a_cooperative_groups_block_kernel_validates_on_hip_and_opencl(tmp_path: Path) -> None:
    _need_runtimes()
    src = tmp_path / "cg_block_sum.cu"
    shutil.copy(ROOT / "tests" / "fixtures" / "cuda" / "cg_block_sum.cu", src)
    r = porter("port", str(src), "--out", str(tmp_path / "out"), "--json", "--trials", "1")
    assert r.returncode == 0, r.stderr + r.stdout
    rows = [row for k in json.loads(r.stdout)["kernels"] for row in k["variants"]]
    for target in ("hip", "opencl"):
        assert any(row["target"] == target and row["status"] == "validated" for row in rows), rows
    assert not any(row["status"] in ("failed", "untranslatable") for row in rows), rows


def test_unicode_kernel_names_validate_on_hip_and_opencl(tmp_path: Path) -> None:
    # `kérnel` and `sc\u00e4le` (C++11 identifiers): the HIP builds for AMD looked the kernel up by a
    # mangled name counted in characters, and clang-19's assembly of it did not assemble -- a false
    # "does not compile"; where a toolchain refuses such names (nvcc, NVRTC) the row says so in one line
    _need_runtimes()
    src = tmp_path / "unicode_kernels.cu"
    shutil.copy(ROOT / "tests" / "fixtures" / "cuda" / "unicode_kernels.cu", src)
    r = porter(
        "port", str(src), "--to", "hip,opencl", "--out", str(tmp_path / "out"), "--json", "--trials", "1"
    )
    doc = json.loads(r.stdout)
    assert [k["name"] for k in doc["kernels"]] == ["kérnel", "sc\\u00e4le"]
    refused = []
    for kernel in doc["kernels"]:
        rows = kernel["variants"]
        assert any(row["target"] == "hip" and row["device"] == "cpu:cpu-emulator" and row["status"] == "validated"
                   for row in rows), rows  # fmt: skip
        for arch in ("gfx90a", "gfx942"):
            if _hipcc_reaches(arch):
                assert [row["status"] for row in rows if row["device"] == f"hip:{arch}"] == ["compiled"], rows
        # on an NVIDIA GPU, HIP-on-CUDA and the original (the reference there) go through NVRTC, which
        # refuses the name: said in one line naming the kernel
        failed = [row for row in rows if row["status"] not in ("validated", "compiled")]
        assert all(f"kernel name {kernel['name']!r} is not ASCII" in row["reason"] for row in failed), rows
        opencl = [row for row in rows if row["target"] == "opencl"]
        assert opencl and all(row["status"] == "validated" or row in failed for row in opencl), rows
        if not failed:  # no NVIDIA toolchain in the way: validated on an OpenCL device too
            assert any(row["status"] == "validated" for row in opencl), rows
        refused += failed
    assert r.returncode == (1 if refused else 0), r.stderr + r.stdout
