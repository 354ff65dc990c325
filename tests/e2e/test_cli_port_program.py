"""`porter port DIR` and `porter port FILE` whose kernels live in a header: programs from the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SMOOTH = ROOT / "samples" / "programs" / "smooth"


def porter(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900, cwd=cwd
    )


def test_port_a_folder_prints_the_program_document_and_the_hip_tree_builds(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    out = tmp_path / "out"
    r = porter("port", str(src), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["schema"] == "porter-program-report/1"
    statuses = {f["path"]: {t: v["status"] for t, v in f["targets"].items()} for f in doc["program"]["files"]}
    assert statuses["src/main.cu"]["hip"] in ("compiled", "translated")
    assert (out / "report.md").is_file() and (out / "diagnostics.txt").is_file()
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        pytest.skip("hipcc not installed: the HIP tree is not built as a program here")
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    built = subprocess.run(
        [hipcc, "--offload-arch=gfx90a", "-O2", "-Iinclude", "-o", "smooth", "src/main.cu", "src/util.cpp"],
        cwd=out / "hip", capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr  # the mirrored tree builds as it is, host code and all


def test_a_file_whose_kernels_live_in_a_header_is_ported_as_a_program(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    r = porter("port", str(src / "src" / "main.cu"), "-I", str(src / "include"), "--translate-only")
    assert r.returncode == 0, r.stderr + r.stdout
    out = src / "src" / "main.ported"  # <stem>.ported beside the file, as for any single file
    assert (out / "hip" / "src" / "main.cu").is_file() or (out / "hip" / "main.cu").is_file()
    assert any(p.name == "smooth_kernels.cuh" for p in (out / "hip").rglob("*"))
    assert "no __global__ kernel found" not in r.stderr
    doc = json.loads((out / "report.json").read_text())
    assert {k["name"] for k in doc["kernels"]} == {"box_smooth", "affine"}


def test_model_with_a_program_is_refused_clearly(tmp_path: Path) -> None:
    r = porter("port", str(SMOOTH), "--model", "openai:gpt-x", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--model takes one CUDA file" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_port_with_run_builds_runs_and_compares_and_prints_the_program_verdict(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    out = tmp_path / "out"
    args = ("port", str(src), "--to", "hip", "--out", str(out), "--run", "./smooth data/values.txt 4")
    r = porter(*args, "--toolchains", "cpu-runtime")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "program verdict, hip: matches (cpu:cpu-emulator, cpu:cpu-emulator-wave64)" in " ".join(
        r.stdout.split()
    )
    doc = json.loads((out / "report.json").read_text())
    runs = doc["program"]["runs"]
    assert runs[0]["original"]["exit"] == 0 and runs[0]["variants"][0]["status"] == "matches"
    # every program toolchain here: the builds each say what they did (built / unavailable / failed)
    r = porter(*args, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    builds = {
        (b["variant"], b["toolchain"]): b["status"]
        for b in json.loads(r.stdout)["program"]["build"]["programs"]
    }
    assert builds[("original", "cpu-runtime")] == builds[("hip", "cpu-runtime")] == "built"
    if shutil.which("hipcc"):
        assert builds[("hip", "hipcc")] == "built"  # the HIP tree builds for gfx90a (not run: no AMD GPU)
    if shutil.which("nvcc"):
        assert builds[("original", "nvcc")] == builds[("hip", "hip-on-cuda")] == "built"


def test_with_two_runs_every_kernel_is_replayed_from_the_capture_on_every_cpu_device(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    out = tmp_path / "out"
    args = (
        "port", str(src), "--to", "hip,opencl", "--out", str(out), "--toolchains", "cpu-runtime",
        "--run", "./smooth data/values.txt 4", "--run", "./smooth data/values.txt 2",
    )  # fmt: skip
    r = porter(*args)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "kernels, replayed from the program's run" in r.stdout
    doc = json.loads((out / "report.json").read_text())
    for kernel in doc["kernels"]:
        rows = kernel["replays"]
        by = {(row["variant"], row["device"]): row for row in rows}
        assert by[("original", "cpu:cpu-emulator")]["status"] == "validated", rows
        assert by[("hip", "cpu:cpu-emulator")]["status"] == "validated", rows
        opencl = [row for row in rows if row["variant"] == "opencl"]
        assert opencl and all(row["status"] == "validated" for row in opencl), opencl
        # the second run's launches were held back and checked
        assert all(
            row["launches"] == 2 and row["held_back"] == 1 for row in rows if row["status"] == "validated"
        )
    assert "Kernels replayed from the program's run" in (out / "report.md").read_text()
    # a re-run reuses every replay verdict
    again = porter(*args, "--json")
    assert again.returncode == 0, again.stderr
    rows = [row for k in json.loads((out / "report.json").read_text())["kernels"] for row in k["replays"]]
    assert rows and all(row["resumed"] for row in rows)


def test_every_instantiation_of_a_template_kernel_is_replayed_under_its_own_name(tmp_path: Path) -> None:
    # samples/cuda/templated.cu launches axpby<T> inside run_axpby<float> and run_axpby<double>
    for name in ("templated.cu", "common.cuh"):
        shutil.copy(ROOT / "samples" / "cuda" / name, tmp_path / name)
    out = tmp_path / "out"
    r = porter(
        "port", str(tmp_path / "templated.cu"), "--to", "hip", "--out", str(out), "--toolchains", "cpu-runtime",
        "--run", "",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads((out / "report.json").read_text())
    rows = {
        (row["instance"], row["variant"], row["wavefront"]): row
        for k in doc["kernels"]
        for row in k["replays"]
    }
    for instance in ("axpby<float>", "axpby<double>", "block_sum<256>", "block_sum<128>"):
        for variant, lanes in (("original", 32), ("hip", 32), ("hip", 64)):
            assert rows[(instance, variant, lanes)]["status"] == "validated", (instance, variant, lanes, rows)


def test_a_kernel_sized_from_argv_is_validated_from_the_programs_run(tmp_path: Path) -> None:
    src = tmp_path / "main.cu"
    shutil.copy(ROOT / "tests" / "fixtures" / "programs" / "argv_size" / "main.cu", src)
    out = tmp_path / "out"
    r = porter(
        "port",
        str(src),
        "--to",
        "hip",
        "--out",
        str(out),
        "--toolchains",
        "cpu-runtime",
        "--run",
        "./main 300",
    )
    assert r.returncode == 0, r.stderr + r.stdout
    rows = [row for k in json.loads((out / "report.json").read_text())["kernels"] for row in k["replays"]]
    assert {(row["variant"], row["wavefront"], row["status"]) for row in rows} == {
        ("original", 32, "validated"), ("hip", 32, "validated"), ("hip", 64, "validated"),
    }  # fmt: skip
    assert all(row["launches"] == 1 for row in rows)


def test_porter_capture_writes_the_documented_folder(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    r = porter("capture", str(src), "--run", "./smooth data/values.txt 4", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    folder = Path(doc["runs"][0]["folder"])
    assert folder == tmp_path / "smooth.capture" / "run-1"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema"] == "porter-capture/1" and manifest["kernels"] == {
        "box_smooth": [1],
        "affine": [1],
    }
    missing = porter("capture", str(src))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_bad_run_options_exit_2_with_one_line(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    for extra in (["--translate-only"], ["--timeout", "0"], ["--toolchains", "nope"], ["--model", "fake"]):
        r = porter("port", str(src), "--out", str(tmp_path / "o"), "--run", "x", *extra)
        assert r.returncode == 2, (extra, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.gpu
def test_on_an_nvidia_gpu_the_original_and_the_hip_port_run_natively_and_match(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    out = tmp_path / "out"
    r = porter(
        "port", str(src), "--to", "hip", "--out", str(out), "--run", "./smooth data/values.txt 4",
        "--toolchains", "nvcc,hip-on-cuda,cpu-runtime", "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    run = doc["program"]["runs"][0]
    gpu = [o for o in run["originals"] if o["toolchain"] == "nvcc"]
    assert gpu and gpu[0]["status"] == "ran" and gpu[0]["exit"] == 0 and gpu[0]["device"].startswith("cuda:")
    native = [v for v in run["variants"] if v["toolchain"] == "hip-on-cuda"]
    assert native and native[0]["status"] == "matches", native
    assert native[0]["against"] == gpu[0]["device"]  # compared with the original on the same GPU
    assert doc["program"]["verdicts"]["hip"]["status"] == "matches"
    # the kernels, replayed from the launches the original's native run on the GPU captured
    assert gpu[0]["capture"] and gpu[0]["capture_kind"] == "gpu"
    programs = doc["program"]["build"]["programs"]
    build = next(b for b in programs if b["toolchain"] == "nvcc" and b["variant"] == "original")
    assert build["captures"], build
    rows = [row for k in doc["kernels"] for row in k["replays"]]
    assert rows and all(row["captured_on"] == gpu[0]["device"] for row in rows), rows
    assert any(
        row["variant"] == "original" and row["device"].startswith("cuda:") and row["status"] == "validated"
        for row in rows
    ), rows
    assert all(row["status"] == "validated" for row in rows if row["variant"] == "hip"), rows


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_the_readme_main_command_ports_the_sample_program_and_prints_its_verdict(tmp_path: Path) -> None:
    import re
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    main = re.findall(r"```sh\n(.*?)\n```", readme, re.S)[0]
    words = shlex.split(main.split("&& .venv/bin/porter ", 1)[1])
    assert words[:2] == ["port", "samples/programs/smooth"] and "--run" in words
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    r = porter(
        *[str(src) if w == "samples/programs/smooth" else w for w in words], "--out", str(tmp_path / "o")
    )
    assert r.returncode == 0, r.stderr + r.stdout
    assert "program verdict, hip: matches" in " ".join(r.stdout.split())


def test_a_compilation_database_entry_outside_the_program_is_refused_naming_it(tmp_path: Path) -> None:
    """The probe's compile_commands.json: ``../../../etc/passwd`` made the root ``/`` and copied
    /etc/passwd to out/hip/etc/passwd, exit 0."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.cu").write_text(
        "__global__ void k(float* x) { x[0] = 1; }\n"
        "int main() { float* d; cudaMalloc(&d, 4); k<<<1, 1>>>(d); return 0; }\n"
    )
    db = proj / "compile_commands.json"
    db.write_text(
        json.dumps(
            [
                {"directory": str(proj), "file": "main.cu", "command": "nvcc -c main.cu"},
                {
                    "directory": str(proj),
                    "file": "../../../etc/passwd",
                    "command": "nvcc -c ../../../etc/passwd",
                },
            ]
        )
    )
    out = tmp_path / "out"
    r = porter("port", str(db), "--to", "hip", "--out", str(out))
    assert r.returncode == 2, r.stderr + r.stdout
    assert f"{db}: entry 2 (index 1)" in r.stderr and "outside the program's folder" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() and not list(tmp_path.rglob("passwd"))


SIZED = ROOT / "tests" / "fixtures" / "programs" / "sized_by_macro"


def _replays(doc: dict) -> dict[str, set[str]]:  # type: ignore[type-arg]
    """variant -> the statuses of its kernel replays."""
    found: dict[str, set[str]] = {}
    for k in doc["kernels"]:
        for r in k.get("replays", ()):
            found.setdefault(r["variant"], set()).add(r["status"])
    return found


def test_a_size_only_a_command_line_define_gives_builds_runs_and_replays(tmp_path: Path) -> None:
    """N comes from -D N=1000 alone: the per-file compile checks, the program builds and every kernel
    replay (original, HIP, OpenCL) are built with it (the replay used to compile without it)."""
    src = tmp_path / "sized"
    shutil.copytree(SIZED, src)
    out = tmp_path / "out"
    r = porter(
        "port", str(src), "--to", "hip,opencl", "--run", "", "-D", "N=1000",
        "--toolchains", "cpu-runtime", "--out", str(out), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    doc = json.loads(r.stdout)
    build = doc["program"]["build"]
    assert build["defines"] == ["N=1000"] and build["define_origins"] == {"N": "command line"}
    assert {f["targets"]["hip"]["status"] for f in doc["program"]["files"]} == {"compiled"}
    assert all(b["status"] == "built" for b in build["programs"] if b["status"] != "unavailable")
    run = doc["program"]["runs"][0]
    assert "N=1000 " in run["original"]["stdout_tail"]
    replays = _replays(doc)
    assert replays["original"] == {"validated"} and replays["hip"] == {"validated"}
    assert replays["opencl"] == {"validated"}, doc["kernels"]


def test_a_compilation_databases_define_is_used_and_the_command_line_wins(tmp_path: Path) -> None:
    """N and SCALE come from compile_commands.json; -U SCALE drops the database's (the source's own
    default, 3.0f, applies), -D N=640 replaces its N: what runs and what is replayed agree."""
    src = tmp_path / "sized"
    shutil.copytree(SIZED, src)
    db = [{"directory": str(src), "file": "main.cu", "command": "nvcc -DN=777 -DSCALE=2.0f -c main.cu"}]
    (src / "compile_commands.json").write_text(json.dumps(db))
    out = tmp_path / "out"
    r = porter(
        "port", str(src / "compile_commands.json"), "--to", "hip,opencl", "--run", "", "--toolchains",
        "cpu-runtime", "--out", str(out), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    doc = json.loads(r.stdout)
    assert doc["program"]["build"]["define_origins"] == {
        "N": "compile_commands.json",
        "SCALE": "compile_commands.json",
    }
    assert "N=777 " in doc["program"]["runs"][0]["original"]["stdout_tail"]
    assert set().union(*_replays(doc).values()) == {"validated"}
    out2 = tmp_path / "out2"
    r = porter(
        "port", str(src / "compile_commands.json"), "--to", "hip", "--run", "", "-D", "N=640", "-U", "SCALE",
        "--toolchains", "cpu-runtime", "--out", str(out2), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    doc = json.loads(r.stdout)
    assert doc["program"]["build"]["define_origins"] == {"N": "command line"}
    tail = doc["program"]["runs"][0]["original"]["stdout_tail"]
    assert "N=640 " in tail and "last=" in tail
    assert set().union(*_replays(doc).values()) == {"validated"}


def test_a_define_that_is_not_a_macro_name_is_a_usage_error(tmp_path: Path) -> None:
    src = tmp_path / "sized"
    shutil.copytree(SIZED, src)
    r = porter("port", str(src), "--run", "", "-D", "1N=4", "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert "'1N' is not a macro name" in r.stderr and "Traceback" not in r.stderr
    r = porter("port", str(src / "main.cu"), "-U", "N", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "-U drops a macro a compile_commands.json defines" in r.stderr


PER_UNIT = ROOT / "tests" / "fixtures" / "programs" / "per_unit_macros"


def test_each_unit_of_a_compilation_database_is_built_and_replayed_with_its_own_defines(
    tmp_path: Path,
) -> None:
    """a.cu is compiled with -DSCALE=2.0f and b.cu with -DSCALE=10.0f: the program's output and each
    kernel's replay follow its own unit's line (merged program-wide, both got SCALE=10)."""
    src = tmp_path / "pu"
    shutil.copytree(PER_UNIT, src)
    r = porter(
        "port", str(src / "compile_commands.json"), "--to", "hip,opencl", "--run", "", "--toolchains",
        "cpu-runtime", "--out", str(tmp_path / "out"), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    doc = json.loads(r.stdout)
    expected = [2.0 * (1.0 + i % 7) + 10.0 for i in range(512)]
    tail = doc["program"]["runs"][0]["original"]["stdout_tail"]
    assert f"sum={sum(expected):.1f} first={expected[0]:.1f}" in tail, tail
    assert doc["program"]["runs"][0]["variants"][0]["status"] == "matches"
    replays = _replays(doc)
    assert set(replays) == {"original", "hip", "opencl"} and set().union(*replays.values()) == {"validated"}


HEADER_KERNELS = ROOT / "tests" / "fixtures" / "programs" / "header_kernels"


@pytest.fixture(scope="module")
def header_kernels_port(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    """tests/fixtures/programs/header_kernels ported to OpenCL and replayed: its kernels live in
    include/kern.cuh (found through -I), so the OpenCL translation lists its template's instances only."""
    tmp = tmp_path_factory.mktemp("header_kernels")
    src = tmp / "header_kernels"
    shutil.copytree(HEADER_KERNELS, src)
    out = tmp / "out"
    r = porter(
        "port", str(src), "-I", str(src / "include"), "--to", "opencl", "--toolchains", "cpu-runtime",
        "--run", "", "--out", str(out),
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr + r.stdout[-3000:]
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


def _rows(doc: dict, kernel: str, variant: str) -> list[dict]:  # type: ignore[type-arg]
    return [r for k in doc["kernels"] if k["name"] == kernel for r in k["replays"] if r["variant"] == variant]


def _variants_judged_here() -> tuple[str, ...]:
    """The original, and the OpenCL port where an OpenCL device runs kernels here."""
    from porter.backends import get_backend

    return (
        ("original", "opencl")
        if any(d.role == "runs" for d in get_backend("opencl").devices())
        else ("original",)
    )


def test_a_kernel_whose_header_declares_dynamic_shared_memory_and_a_constant_is_replayed(
    header_kernels_port: dict,  # type: ignore[type-arg]
) -> None:
    # the header's `extern __shared__ float part[];` is rewritten in the kernel's build though it is
    # found through the -I folder below the program's own (it failed to compile: "conflicting
    # specifiers"), and the header's __constant__ is set from the capture (it was left zero)
    for variant in _variants_judged_here():
        rows = _rows(header_kernels_port, "scaled_sums", variant)
        assert rows and all(r["status"] == "validated" for r in rows), (variant, rows)


def test_each_instance_of_a_template_launched_in_a_host_template_is_judged_by_its_own_launch(
    header_kernels_port: dict,  # type: ignore[type-arg]
) -> None:
    # twice<T><<<...>>> inside run_twice<T>, for float and double: the capture names twice<float> and
    # twice<double>, which the OpenCL translation lists apart (no `twice` kernel): each is judged
    for instance in ("twice<float>", "twice<double>"):
        for variant in _variants_judged_here():
            rows = _rows(header_kernels_port, instance, variant)
            assert rows and all(r["status"] == "validated" for r in rows), (instance, variant, rows)
            assert all(r["instance"] == instance and r["launches"] == 1 for r in rows), rows
    notes = header_kernels_port["notes"]
    assert not [n for n in notes if "not a kernel porter found" in n], notes


def test_a_read_only_program_that_rewrites_its_own_file_runs_and_matches_as_hip_and_opencl(
    tmp_path: Path,
) -> None:
    """A checkout porter may only read (a shared corpus): the scratch copies it runs are the owner's to
    write, so the program rewrites its own results.txt there -- original and ports alike.  The program
    also refuses a device without copy/kernel overlap (the CPU runtime's virtual device has it) and
    compares a call with the driver API's CUDA_SUCCESS (which OpenCL's program runtime defines too)."""
    src = tmp_path / "own_files"
    shutil.copytree(ROOT / "tests" / "fixtures" / "programs" / "own_files", src)
    for f in [src, *src.iterdir()]:
        f.chmod(0o555 if f.is_dir() else 0o444)
    out = tmp_path / "out"
    try:
        r = porter(
            "port", str(src), "--to", "hip,opencl", "--out", str(out), "--run", "",
            "--toolchains", "cpu-runtime,opencl", "--json",
        )  # fmt: skip
    finally:
        for f in [src, *src.iterdir()]:
            f.chmod(0o755 if f.is_dir() else 0o644)
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    verdicts = {t: v["status"] for t, v in doc["program"]["verdicts"].items()}
    assert verdicts == {"hip": "matches", "opencl": "matches"}, doc["program"]["verdicts"]
    run = doc["program"]["runs"][0]
    assert run["original"]["exit"] == 0 and run["original"]["stdout_tail"] == "sum 83208375.000\n"
    assert (src / "results.txt").read_text() == "(the last run's sum)\n"  # the user's file is untouched
