"""porter's CPU runtime: whole CUDA and HIP programs (host code and kernels) built with g++ and run.

The programs are porter's own fixtures under tests/fixtures/programs/: two runtime tours (CUDA, with a
plain C unit, and its HIP twin) that print one deterministic line per runtime feature and end with
PASS, programs the runtime must refuse (cuBLAS, the driver API, active texture code), one whose
texture code the preprocessor drops, and one with a compile error on a known line.  The launch
rewriting itself is tested on text in tests/backends/test_launches.py.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from porter.backends import get_backend
from porter.backends.programs import BuiltProgram, ProgramSource

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"
RUNTIME_TOML = ROOT / "backends" / "cpu" / "runtime.toml"
RUN_TIMEOUT_S = 60

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def compiles(fn):
    """A test that builds a program: integration tier, skipped without g++."""
    return pytest.mark.integration(needs_gxx(fn))


def build(
    tree: Path,
    out: Path,
    units: tuple[str, ...] = ("main.cu",),
    language: str = "cuda",
    defines: tuple[str, ...] = (),
) -> BuiltProgram:
    tc = get_backend("cpu").program_toolchains()[0]
    src = ProgramSource(tree=tree, units=units, include_dirs=(), defines=defines, language=language)
    return tc.build(src, out)


def run(exe: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([exe], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=cwd)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_program(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def built_ok(built: BuiltProgram) -> BuiltProgram:
    assert built.ok, f"{built.reason}\n{built.log}"
    return built


def virtual_device() -> dict:
    with RUNTIME_TOML.open("rb") as f:
        data = tomllib.load(f)
    return {**data["virtual_device"], "warp_size": data["program"]["compiler"]["warp_size"]}


# --------------------------------------------------------------------------- the runtime tours

# Lines both tours print, in order, before the lines only one of them prints.
DEVICE_LINES = [
    "device count: 1",
    "name: porter CPU runtime (virtual device)",
    "warpSize: 32",
    "compute capability: 8.0",
    "maxThreadsPerBlock: 1024",
    "multiProcessorCount: 8",
]
CUDA_TOUR = [
    *DEVICE_LINES,
    "host_c_init: 0",
    "host_c_bad_device: 101",
    "memset bits: ffffffff",
    "counter: 1000",
    "saxpy sum: 10250.0",
    "template[7]: 22.0",
    "fill_value[0]: 2.50",
    "block_sum: 4500.0",
    "fill2d corner: 20036",
    "managed[63]: 3969",
    "stream[0]: 16384",
    "elapsed >= 0: yes",
    "cudaLaunchKernel[99]: 297",
    "invalid launch: cudaErrorInvalidConfiguration",
    "after: cudaSuccess",
    "cudaSuccess string: no error",
    "PASS",
]
HIP_TOUR = [
    *DEVICE_LINES,
    "memset bits: ffffffff",
    "counter: 1000",
    "saxpy sum: 10250.0",
    "template[7]: 12.0",
    "fill_value[0]: 2.50",
    "block_sum: 4500.0",
    "fill2d corner: 20036",
    "managed[63]: 3969",
    "stream[0]: 16384",
    "elapsed >= 0: yes",
    "hipLaunchKernel[99]: 297",
    "invalid launch is hipErrorInvalidConfiguration: yes",
    "invalid launch: <name>",
    "after is hipSuccess: yes",
    "after: <name>",
    "hipSuccess string: no error",
    "PASS",
]


@pytest.fixture(scope="module")
def cuda_tour(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[BuiltProgram, subprocess.CompletedProcess[str]]:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    tmp = tmp_path_factory.mktemp("cuda_tour")
    built = built_ok(build(PROGRAMS / "runtime_tour", tmp / "build", units=("main.cu", "host_c.c")))
    return built, run(next(iter(built.executables.values())), tmp / "run")


@pytest.fixture(scope="module")
def hip_tour(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[BuiltProgram, subprocess.CompletedProcess[str]]:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    tmp = tmp_path_factory.mktemp("hip_tour")
    built = built_ok(build(PROGRAMS / "runtime_tour_hip", tmp / "build", units=("main.cpp",), language="hip"))
    return built, run(next(iter(built.executables.values())), tmp / "run")


@compiles
def test_cuda_tour_passes(cuda_tour) -> None:
    built, proc = cuda_tour
    assert set(built.executables) == {"main.cu"}  # one executable per unit defining main
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "PASS"
    assert not [line for line in lines if line.startswith("mismatch")]
    assert "launch of" not in proc.stderr  # no launch failed


@compiles
def test_cuda_tour_prints_every_result(cuda_tour) -> None:
    _, proc = cuda_tour
    assert proc.stdout.splitlines() == CUDA_TOUR


@compiles
def test_cuda_tour_sees_the_virtual_device_of_runtime_toml(cuda_tour) -> None:
    _, proc = cuda_tour
    dev = virtual_device()
    lines = proc.stdout.splitlines()
    assert f"name: {dev['name']}" in lines
    assert f"warpSize: {dev['warp_size']}" in lines
    assert f"compute capability: {dev['major']}.{dev['minor']}" in lines
    assert f"maxThreadsPerBlock: {dev['maxThreadsPerBlock']}" in lines
    assert f"multiProcessorCount: {dev['multiProcessorCount']}" in lines


@compiles
def test_cuda_tour_invalid_launch_error_and_reset(cuda_tour) -> None:
    _, proc = cuda_tour
    lines = proc.stdout.splitlines()
    k = lines.index("invalid launch: cudaErrorInvalidConfiguration")
    assert lines[k + 1] == "after: cudaSuccess"
    assert lines[k + 2] == "cudaSuccess string: no error"


@compiles
def test_cuda_tour_links_the_c_entry_points(cuda_tour) -> None:
    built, proc = cuda_tour
    assert any("porter_runtime_c.cpp" in cmd for cmd in built.commands)
    assert any(" -x c " in f" {cmd} " and "host_c.c" in cmd for cmd in built.commands)  # compiled as C
    lines = proc.stdout.splitlines()
    assert "host_c_init: 0" in lines
    assert "host_c_bad_device: 101" in lines  # cudaErrorInvalidDevice, from the C call


@compiles
def test_hip_tour_passes(hip_tour) -> None:
    built, proc = hip_tour
    assert set(built.executables) == {"main.cpp"}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "PASS"
    assert not [line for line in lines if line.startswith("mismatch")]
    assert any("-DPORTER_HIP=1" in cmd for cmd in built.commands)


@compiles
def test_hip_tour_prints_every_result(hip_tour) -> None:
    _, proc = hip_tour
    lines = proc.stdout.splitlines()
    # the error-name lines are checked by test_hip_error_names_are_hip_names
    masked = ["invalid launch: <name>" if line.startswith("invalid launch: ") else line for line in lines]
    masked = ["after: <name>" if line.startswith("after: ") else line for line in masked]
    assert masked == HIP_TOUR


@compiles
def test_hip_tour_sees_the_virtual_device_of_runtime_toml(hip_tour) -> None:
    _, proc = hip_tour
    dev = virtual_device()
    lines = proc.stdout.splitlines()
    assert "name: porter CPU runtime (virtual device)" in lines
    assert f"name: {dev['name']}" in lines
    assert "warpSize: 32" in lines
    assert f"warpSize: {dev['warp_size']}" in lines


@compiles
def test_hip_error_names_are_hip_names(hip_tour) -> None:
    _, proc = hip_tour
    lines = proc.stdout.splitlines()
    assert "invalid launch: hipErrorInvalidConfiguration" in lines
    assert "after: hipSuccess" in lines


@compiles
def test_hip_host_malloc_with_flags(tmp_path: Path) -> None:
    tree = write_program(
        tmp_path / "src",
        {
            "main.cpp": (
                "#include <hip/hip_runtime.h>\n"
                "#include <stdio.h>\n"
                "int main() {\n"
                "    int* p = NULL;\n"
                "    if (hipHostMalloc(&p, 64 * sizeof(int), hipHostMallocDefault) != hipSuccess) return 1;\n"
                "    p[63] = 7;\n"
                '    printf("%d\\n", p[63]);\n'
                "    return hipHostFree(p) == hipSuccess ? 0 : 1;\n"
                "}\n"
            )
        },
    )
    built = build(tree, tmp_path / "build", units=("main.cpp",), language="hip")
    assert built.ok, built.log
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert (proc.returncode, proc.stdout) == (0, "7\n")


HIP_SUFFIX_PROGRAM = (
    "#include <hip/hip_runtime.h>\n"
    "#include <stdio.h>\n"
    "__global__ void iota(int* p) { p[threadIdx.x] = threadIdx.x; }\n"
    "int main() {\n"
    "    int* d = NULL;\n"
    "    hipMalloc(&d, 64 * sizeof(int));\n"
    "    iota<<<1, 64>>>(d);\n"
    "    int h[64];\n"
    "    hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost);\n"
    '    printf("%d\\n", h[63]);\n'
    "    return h[63] == 63 ? 0 : 1;\n"
    "}\n"
)


@compiles
def test_hip_program_in_a_cpp_unit(tmp_path: Path) -> None:
    tree = write_program(tmp_path / "src", {"main.cpp": HIP_SUFFIX_PROGRAM})
    built = built_ok(build(tree, tmp_path / "build", units=("main.cpp",), language="hip"))
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert (proc.returncode, proc.stdout) == (0, "63\n")


@compiles
def test_hip_program_in_a_hip_unit(tmp_path: Path) -> None:
    tree = write_program(tmp_path / "src", {"main.hip": HIP_SUFFIX_PROGRAM})
    built = build(tree, tmp_path / "build", units=("main.hip",), language="hip")
    assert built.ok, built.reason
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert (proc.returncode, proc.stdout) == (0, "63\n")


PROTOTYPED_KERNEL = (
    "#include <cuda_runtime.h>\n"
    "#include <stdio.h>\n"
    "__global__ void fill_value(float* out, const float* extra, float value, int n);\n"
    "__global__ void fill_value(float* out, const float* extra, float value, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = value + (extra != NULL ? extra[i] : 0.0f);\n"
    "}\n"
    "int main() {\n"
    "    float* d = NULL;\n"
    "    cudaMalloc(&d, 64 * sizeof(float));\n"
    "    fill_value<<<1, 64>>>(d, NULL, 2.5, 64);\n"
    "    float h[64];\n"
    "    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
    '    printf("%.2f\\n", h[63]);\n'
    "    return h[63] == 2.5f ? 0 : 1;\n"
    "}\n"
)


@compiles
def test_prototyped_kernel_launched_with_null(tmp_path: Path) -> None:
    tree = write_program(tmp_path / "src", {"main.cu": PROTOTYPED_KERNEL})
    built = build(tree, tmp_path / "build")
    assert built.ok, built.log
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert (proc.returncode, proc.stdout) == (0, "2.50\n")


# --------------------------------------------------------------------------- refusals


@compiles
def test_cublas_is_refused(tmp_path: Path) -> None:
    built = build(PROGRAMS / "uses_cublas", tmp_path)
    assert not built.ok
    assert built.refused
    assert built.reason.startswith("cannot emulate: cuBLAS"), built.reason
    assert "main.cu line 3" in built.reason  # the #include <cublas_v2.h>
    assert not built.executables


@compiles
def test_inactive_texture_code_builds_and_runs(tmp_path: Path) -> None:
    built = built_ok(build(PROGRAMS / "inactive_texture", tmp_path / "build"))
    assert not built.refused
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["out[299]: 74.75", "PASS"]


@compiles
def test_active_texture_code_is_refused(tmp_path: Path) -> None:
    built = build(PROGRAMS / "inactive_texture", tmp_path, defines=("USE_TEXTURE",))
    assert not built.ok
    assert built.refused
    assert built.reason.startswith("cannot emulate: textures"), built.reason
    assert "main.cu line 7" in built.reason  # the first texture construct the preprocessor keeps
    assert not built.executables


@compiles
def test_driver_api_is_refused(tmp_path: Path) -> None:
    built = build(PROGRAMS / "driver_api", tmp_path)
    assert not built.ok
    assert built.refused
    assert built.reason.startswith("cannot emulate: the CUDA driver API"), built.reason
    assert "cuInit" in built.reason
    assert "main.cu line 6" in built.reason
    assert not built.executables


# --------------------------------------------------------------------------- the user's files


@compiles
@pytest.mark.parametrize(
    ("folder", "units", "language", "defines"),
    [
        ("runtime_tour", ("main.cu", "host_c.c"), "cuda", ()),
        ("runtime_tour_hip", ("main.cpp",), "hip", ()),
        ("uses_cublas", ("main.cu",), "cuda", ()),
        ("inactive_texture", ("main.cu",), "cuda", ()),
        ("inactive_texture", ("main.cu",), "cuda", ("USE_TEXTURE",)),
        ("driver_api", ("main.cu",), "cuda", ()),
        ("compile_error", ("main.cu",), "cuda", ()),
    ],
)
def test_build_leaves_the_users_folder_unchanged(
    tmp_path: Path, folder: str, units: tuple[str, ...], language: str, defines: tuple[str, ...]
) -> None:
    tree = PROGRAMS / folder
    before = snapshot(tree)
    assert before
    build(tree, tmp_path, units=units, language=language, defines=defines)
    assert snapshot(tree) == before


@compiles
def test_rewritten_copies_live_in_the_build_folder(tmp_path: Path) -> None:
    tree = PROGRAMS / "runtime_tour"
    built_ok(build(tree, tmp_path, units=("main.cu", "host_c.c")))
    copy = (tmp_path / "src" / "main.cu").read_text(encoding="utf-8")
    original = (tree / "main.cu").read_text(encoding="utf-8")
    assert "<<<" in original and "<<<" not in copy
    assert copy.count("\n") == original.count("\n")
    header = (tmp_path / "src" / "kernels.cuh").read_text(encoding="utf-8").splitlines()
    lines = (tree / "kernels.cuh").read_text(encoding="utf-8").count("\n")
    # every line where it was; after the last, the registrations of its __constant__/__device__ variables
    # and of its kernels
    assert header[lines : lines + 4] == [
        "#ifdef __cplusplus", "PORTER_REGISTER_SYMBOL(c_coeffs, true);", "PORTER_REGISTER_SYMBOL(d_counter, false);",
        "#endif",
    ]  # fmt: skip
    assert header[lines + 4] == "#ifdef __cplusplus" and header[-1] == "#endif"
    assert "PORTER_REGISTER_KERNEL(saxpy_const);" in header[lines + 4 :]


# --------------------------------------------------------------------------- diagnostics


@compiles
def test_compile_error_names_the_users_line(tmp_path: Path) -> None:
    tree = PROGRAMS / "compile_error"
    text = (tree / "main.cu").read_text(encoding="utf-8")
    line = text.splitlines().index("    int* wrong = 3.5;") + 1
    assert line == 24  # the fixture's header comment names it
    built = build(tree, tmp_path)
    assert not built.ok
    assert not built.refused
    assert f"main.cu:{line}:" in built.log, built.log
    assert "main.cu" in built.reason
    assert str(tmp_path / "src") not in built.log  # shown as the user knows the file


@compiles
def test_a_c_unit_including_the_cuda_runtime_header_stays_c_and_links(tmp_path: Path) -> None:
    tree = write_program(
        tmp_path / "src",
        {
            "main.cu": (
                "#include <cstdio>\n"
                'extern "C" int c_side(void);\n'
                "__global__ void one(int* x) { *x = 1; }\n"
                "int main() {\n"
                "    int* d; cudaMalloc(&d, sizeof(int)); one<<<1, 1>>>(d);\n"
                "    int h = 0; cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                '    printf("%d %d\\n", h, c_side()); return 0;\n'
                "}\n"
            ),
            # C, not C++: `new` is an ordinary name here, and the runtime's C view declares cudaMalloc
            "side.c": (
                "#include <cuda_runtime.h>\n"
                "int c_side(void) {\n"
                "    void* new = 0;\n"
                "    if (cudaMalloc(&new, 16) != cudaSuccess) return -1;\n"
                "    if (cudaMemset(new, 0, 16) != cudaSuccess) return -2;\n"
                "    return cudaFree(new) == cudaSuccess ? 7 : -3;\n"
                "}\n"
            ),
        },
    )
    built = built_ok(build(tree, tmp_path / "build", units=("main.cu", "side.c")))
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert proc.returncode == 0 and proc.stdout.strip() == "1 7", proc.stdout + proc.stderr


@compiles
def test_noinline_device_functions_and_standard_headers_after_them(tmp_path: Path) -> None:
    # libstdc++ writes __attribute__((__noinline__)) (shared_ptr_base.h): no macro may rewrite it
    tree = write_program(
        tmp_path / "src",
        {
            "main.cu": (
                "#include <cstdio>\n"
                "__noinline__ __device__ int twice(int v) { return 2 * v; }\n"
                "__global__ void k(int* x) { *x = twice(*x); }\n"
                "#include <memory>\n#include <string>\n#include <thread>\n"
                "int main() {\n"
                '    auto keep = std::make_shared<std::string>("x");\n'
                "    int h = 21; int* d; cudaMalloc(&d, sizeof h);\n"
                "    cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice); k<<<1, 1>>>(d);\n"
                "    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                '    printf("%d %s\\n", h, keep->c_str()); return 0;\n'
                "}\n"
            )
        },
    )
    built = built_ok(build(tree, tmp_path / "build", units=("main.cu",)))
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert proc.stdout.strip() == "42 x", proc.stdout + proc.stderr


def test_the_nvcc_driver_reads_nvcc_command_lines() -> None:
    from porter.backends.cpu.driver import DriverError, parse

    opts, sources, objects, out, compile_only, language = parse(
        "nvcc",
        ["-O3", "-arch=sm_80", "-gencode", "arch=compute_80,code=sm_80", "-Iinclude", "-DN=4", "-Xcompiler",
         "-fopenmp,-Wall", "-lcudart", "-lm", "-c", "-x", "cu", "k.cu", "-o", "k.o", "--use_fast_math"],
    )  # fmt: skip
    assert opts == ["-O3", "-Iinclude", "-DN=4", "-fopenmp", "-Wall", "-lm"]
    assert (sources, objects, out, compile_only, language) == (["k.cu"], [], "k.o", True, "cu")
    for refused in (["-rdc=true", "k.cu"], ["--resource-usage", "k.cu"], ["-dc", "k.cu"]):
        with pytest.raises(DriverError):
            parse("nvcc", refused)
    # a C++ compiler's line (CXX) passes its options on
    assert parse("c++", ["-fopenmp", "--std=c++14", "--param=max-inline-insns-auto=20", "a.cpp"])[0] == [
        "-fopenmp", "-std=c++14", "--param=max-inline-insns-auto=20",
    ]  # fmt: skip


@compiles
def test_a_program_shipping_its_own_unistd_h_builds_and_captures(tmp_path: Path) -> None:
    # Rodinia's kmeans carries a Windows shim named unistd.h on its include path; porter's runtime must
    # not pick it up in place of the system's
    tree = write_program(
        tmp_path / "prog",
        {
            "unistd.h": "#include <standards.h>  /* a shim for another system */\n",
            "main.cu": "#include <cstdio>\n#include <cuda_runtime.h>\n"
            "__global__ void one(int* x) { x[threadIdx.x] = 1; }\n"
            "int main() { int* d; cudaMalloc(&d, 32 * sizeof(int)); one<<<1, 32>>>(d);\n"
            '  int h[32]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost); printf("%d\\n", h[31]); return 0; }\n',
        },
    )
    tc = get_backend("cpu").program_toolchains()[0]
    src = ProgramSource(tree=tree, units=("main.cu",), include_dirs=(str(tree),), defines=(), language="cuda")
    built = built_ok(tc.build(src, tmp_path / "out"))
    exe = next(iter(built.executables.values()))
    env = {"PORTER_CAPTURE_DIR": str(tmp_path / "cap")}
    proc = subprocess.run([exe], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "1", proc.stderr
    assert (tmp_path / "cap" / "launches" / "k0-s0.json").is_file()


# --------------------------------------------------------------------------- launches anywhere (#29)

LAUNCHES_ANYWHERE = {
    # fixture -> the kernels its run must capture, as the capture names them
    "launch_macros": {"add_one", "scale", "square", "halve", "negate<T>", "offset"},
    "launch_pointers": {"add", "mul", "sub", "twice", "axpy", "fill", "rowsum", "cooperative_copy"},
    "launch_templates": {"axpb<float>", "axpb<double>", "block_sum<64>", "clamp_to<T>", "iota", "plus"},
}


@compiles
@pytest.mark.parametrize("name", sorted(LAUNCHES_ANYWHERE))
def test_launches_anywhere_run_and_are_captured(tmp_path: Path, name: str) -> None:
    # launches in macro bodies (rewritten after preprocessing where the text cannot show them), through
    # pointers and the runtime's launch calls (a void* kernel found in porter's registry, a static one
    # named by it), in host templates and lambdas: the program checks its own results, and every kernel
    # is captured under its own name
    import json

    built = built_ok(build(PROGRAMS / name, tmp_path / "build"))
    exe = next(iter(built.executables.values()))
    env = {"PORTER_CAPTURE_DIR": str(tmp_path / "cap")}
    proc = subprocess.run([exe], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("PASSED"), proc.stdout + proc.stderr
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "cap" / "launches").glob("*.json"))]
    assert {r["kernel"] for r in records} == LAUNCHES_ANYWHERE[name]
    assert all(r["status"] == 0 for r in records)


@compiles
def test_a_compile_error_in_a_preprocessed_unit_names_the_users_line(tmp_path: Path) -> None:
    # a launch only preprocessing shows (the macro holds the configuration, its use the arguments): the
    # unit is compiled preprocessed, and the markers keep the user's file and line in the messages
    tree = write_program(
        tmp_path / "prog",
        {
            "main.cu": "#include <cstdio>\n#define CFG(k, n) k<<<(n), 32>>>\n"
            "__global__ void k1(float* x, int n) { if ((int)threadIdx.x < n) x[threadIdx.x] = 1; }\n"
            "int main() {\n  float* d;\n  cudaMalloc(&d, 128);\n  CFG(k1, 1)(d, 32);\n"
            "  int y = undeclared_thing + 1;\n  return y;\n}\n",
        },
    )
    built = build(tree, tmp_path / "out")
    assert not built.ok and not built.refused
    assert "main.cu:8:" in built.log and "undeclared_thing" in built.log, built.log
    assert str(tmp_path / "out") not in built.log


@compiles
def test_a_program_that_only_includes_opengl_builds_and_its_texture_reference_reads_the_bound_memory(
    tmp_path: Path,
) -> None:
    built = built_ok(build(PROGRAMS / "texture_reference", tmp_path / "build"))
    proc = run(next(iter(built.executables.values())), tmp_path / "run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "PASS"  # in range: the bound weights; past it: zero


@compiles
def test_a_program_calling_opengl_is_refused_naming_opengl_and_the_line(tmp_path: Path) -> None:
    tree = write_program(
        tmp_path / "src",
        {
            "main.cu": (
                "#include <GL/glut.h>\n#include <cuda_runtime.h>\n\n"
                "int main(int argc, char** argv) {\n"
                "    glutInit(&argc, argv);\n"
                "    return 0;\n"
                "}\n"
            )
        },
    )
    built = build(tree, tmp_path / "build")
    assert not built.ok and built.refused
    assert built.reason == "cannot emulate: OpenGL (glutInit, main.cu line 5)", built.reason


@compiles
def test_a_2d_texture_reference_is_still_refused_with_its_line(tmp_path: Path) -> None:
    tree = write_program(
        tmp_path / "src",
        {
            "main.cu": (
                "#include <cuda_runtime.h>\n"
                "texture<float, 2, cudaReadModeElementType> img;\n"
                "__global__ void k(float* o) { o[0] = tex2D(img, 0.5f, 0.5f); }\n"
                "int main() { return 0; }\n"
            )
        },
    )
    built = build(tree, tmp_path / "build")
    assert not built.ok and built.refused
    assert built.reason.startswith("cannot emulate: 2-D, 3-D and layered texture references"), built.reason
    assert "main.cu line 2" in built.reason
