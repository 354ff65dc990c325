"""porter.workflows.program_run: the original and the HIP port built as programs, run and compared.

The sample program (samples/programs/smooth: kernels in a header, a host-only .cpp, a Makefile, a data
file, a run that prints PASS) runs on the CPU runtime everywhere, so these tests need only g++.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.model import UNCOMPARED
from porter.program import discover
from porter.report import program_view
from porter.results import ProgramReport
from porter.workflows.program import Hooks, port_program
from porter.workflows.program_run import (
    REORDERED,
    ProgramRuns,
    build_and_run,
    choose,
    main_units,
    program_names,
    run_folder,
)
from porter.workflows.resume import Ledger

ROOT = Path(__file__).resolve().parents[3]
SMOOTH = ROOT / "samples" / "programs" / "smooth"
RUN = "./smooth data/values.txt 4"
CPU = ["cpu-runtime"]


def cpu(*runs: str, **options: object) -> ProgramRuns:
    """Each of `runs` built and run with the CPU runtime alone."""
    return ProgramRuns(runs=runs, toolchains=tuple(CPU), **options)  # type: ignore[arg-type]


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]


@pytest.fixture
def smooth(tmp_path: Path) -> Path:
    shutil.copytree(SMOOTH, tmp_path / "smooth")
    return tmp_path / "smooth"


def _tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_original_and_the_hip_port_run_on_the_cpu_runtime_and_match(smooth: Path) -> None:
    before = _tree_bytes(smooth)
    report = port_program(
        [str(smooth)], ["hip", "opencl"], run=cpu(RUN),
        hooks=Hooks(markdown=program_view.markdown, chart=program_view.chart),
    )  # fmt: skip
    assert _tree_bytes(smooth) == before  # the user's files untouched (the runs wrote to scratch copies)
    assert [(b.variant, b.toolchain, b.status) for b in report.builds] == [
        ("original", "cpu-runtime", "built"),
        ("hip", "cpu-runtime", "built"),
        ("hip", "cpu-runtime-wave64", "built"),  # the HIP port again with AMD's 64-lane wavefronts
    ]
    (run,) = report.runs
    assert run.args == RUN and run.executable == "main"
    assert run.original is not None and run.original.status == "ran" and run.original.exit == 0
    assert "PASS" in run.original.stdout_tail and "checksum" in run.original.stdout_tail
    hip, wide = (v for v in run.variants if v.variant == "hip")
    assert hip.status == "matches" and hip.against == hip.device == "cpu:cpu-emulator"
    assert wide.status == "matches" and wide.device == "cpu:cpu-emulator-wave64"
    opencl = next(v for v in run.variants if v.variant == "opencl")
    # the OpenCL port is a program too, but --toolchains cpu-runtime builds none of it here
    # (tests/e2e/test_cli_port_opencl_program.py builds and runs it)
    assert opencl.status == "not-run" and opencl.reason == "no build of it runs here"
    verdicts = report.verdicts()
    assert verdicts["hip"] == {"status": "matches", "detail": "cpu:cpu-emulator, cpu:cpu-emulator-wave64"}
    assert report.exit_code == 0
    doc = json.loads((Path(report.out_dir) / "report.json").read_text())
    assert doc["schema"] == "porter-program-report/1"
    assert doc["program"]["runs"][0]["original"]["device"] == "cpu:cpu-emulator"
    assert doc["program"]["runs"][0]["variants"][0]["target"] == "hip"
    assert doc["program"]["verdicts"]["hip"]["status"] == "matches"
    assert doc["program"]["build"]["programs"][0]["toolchain"] == "cpu-runtime"
    md = (Path(report.out_dir) / "report.md").read_text()
    assert "## Runs" in md and "| hip | **matches** |" in md
    if report.chart:  # matplotlib installed
        assert Path(report.chart).read_bytes().startswith(b"\x89PNG")


def _ported(smooth: Path, out: Path) -> tuple[object, Path]:
    report = port_program([str(smooth)], ["hip"], out_dir=str(out), translate_only=True)
    return report, out / "hip"


def _rerun(smooth: Path, out: Path, report: object) -> object:
    assert isinstance(report, ProgramReport)
    report.builds.clear()
    report.runs.clear()
    build_and_run(discover([str(smooth)]), out, report, cpu(RUN), ledger=Ledger())
    return report


def test_a_planted_device_side_difference_in_the_port_is_reported_with_its_line(
    smooth: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    report, hip = _ported(smooth, out)
    header = hip / "include" / "smooth_kernels.cuh"
    text = header.read_text()
    assert "scale * in[i] + offset;" in text
    header.write_text(text.replace("scale * in[i] + offset;", "scale * in[i] * 1.001f + offset;"))
    done = _rerun(smooth, out, report)
    hip_run = next(v for v in done.runs[0].variants if v.variant == "hip")  # type: ignore[attr-defined]
    assert hip_run.status == "differs"
    assert "exit code: original 0, port 1" in hip_run.differences
    assert "verdict: the original prints PASS, the port FAIL" in hip_run.differences
    assert any(d.startswith("stdout line 2: original 'checksum = ") for d in hip_run.differences)
    assert done.verdicts()["hip"]["status"] == "differs"  # type: ignore[attr-defined]
    assert done.exit_code == 1  # type: ignore[attr-defined]


def test_a_planted_host_side_difference_is_reported_too(smooth: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report, hip = _ported(smooth, out)
    main = hip / "src" / "main.cu"
    text = main.read_text()
    assert 'printf("n = %d\\n", n);' in text
    main.write_text(text.replace('printf("n = %d\\n", n);', 'printf("n = %d\\n", n + 1);'))
    done = _rerun(smooth, out, report)
    hip_run = next(v for v in done.runs[0].variants if v.variant == "hip")  # type: ignore[attr-defined]
    assert hip_run.status == "differs"
    assert hip_run.differences == ["stdout line 1: original 'n = 4000', port 'n = 4001'"]


def test_a_run_that_hits_the_timeout_is_failed_with_a_clear_reason(tmp_path: Path) -> None:
    prog = tmp_path / "slow"
    prog.mkdir()
    (prog / "main.cu").write_text(
        "#include <cstdio>\n#include <unistd.h>\n__global__ void k(int* x) { x[0] = 1; }\n"
        'int main() { int* d; cudaMalloc(&d, 4); k<<<1, 1>>>(d); sleep(30); puts("PASS"); return 0; }\n'
    )
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "o"), run=cpu("", timeout=1))
    original = report.runs[0].original
    assert original is not None and original.status == "failed"
    assert original.reason == "timed out after 1 s (--timeout)"
    assert len(report.runs[0].variants) == 2  # the CPU runtime at 32 and at 64 lanes per warp
    for hip_run in report.runs[0].variants:  # not run: nothing to compare it with
        assert hip_run.status == "not-run"
        assert hip_run.reason == (
            "the original timed out after 1 s (--timeout) on cpu:cpu-emulator: give a larger --timeout or smaller "
            "arguments"
        )
    assert report.verdicts()["hip"]["status"] == "not-run"


def test_a_port_on_the_emulator_at_64_lanes_is_compared_with_the_originals_emulator_run() -> None:
    """Where the original ran first on a GPU and timed out on the CPU emulator, a port's run on the emulator at 64
    lanes is the emulator's (the H100 suite reported BlackScholes's HIP port failed: its 64-lane run timed out as
    the original had at 32, and was compared with the GPU's)."""
    from porter.results import ProgramRun, RunResult
    from porter.workflows.program_run import _reference, _same_device

    gpu = RunResult("original", "nvcc", "cuda:NVIDIA H100 80GB HBM3", "ran", exit=0)
    emulator = RunResult(
        "original", "cpu-runtime", "cpu:cpu-emulator", "failed", reason="timed out after 120 s"
    )
    run = ProgramRun("", "main")
    run.originals += [gpu, emulator]
    run.original = gpu
    assert _reference(run, "cpu:cpu-emulator-wave64") is emulator
    assert _reference(run, "cpu:cpu-emulator") is emulator
    assert _reference(run, "hip:NVIDIA H100 80GB HBM3") is gpu
    assert _reference(run, "opencl:pthread-cpu") is gpu  # no original there: the first
    assert _same_device("cpu:cpu-emulator-wave64", "cpu:cpu-emulator")
    assert not _same_device("cpu:cpu-emulator", "cuda:NVIDIA H100 80GB HBM3")


def test_a_rerun_with_the_same_inputs_reuses_every_build_and_run(smooth: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    first = port_program([str(smooth)], ["hip"], out_dir=str(out), run=cpu(RUN))
    again = port_program([str(smooth)], ["hip"], out_dir=str(out), run=cpu(RUN))
    assert all(b.resumed for b in again.builds) and not any(b.resumed for b in first.builds)
    assert all(r.resumed for r in [*again.runs[0].originals, *again.runs[0].variants])
    assert (
        again.verdicts()
        == first.verdicts()
        == {"hip": {"status": "matches", "detail": "cpu:cpu-emulator, cpu:cpu-emulator-wave64"}}
    )
    # a changed input is built and run again
    (smooth / "src" / "util.cpp").write_text((smooth / "src" / "util.cpp").read_text() + "\n// changed\n")
    third = port_program([str(smooth)], ["hip"], out_dir=str(out), run=cpu(RUN))
    assert not any(b.resumed for b in third.builds)


def test_a_program_using_cublas_is_refused_with_the_construct_and_its_line(tmp_path: Path) -> None:
    prog = tmp_path / "blas"
    prog.mkdir()
    (prog / "main.cu").write_text(
        "#include <cstdio>\n#include <cublas_v2.h>\n__global__ void k(float* x) { x[0] = 1; }\n"
        'int main() { cublasHandle_t h; cublasCreate(&h); k<<<1, 1>>>(nullptr); puts("PASS"); return 0; }\n'
    )
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "o"), run=cpu(""))
    original = next(b for b in report.builds if b.variant == "original")
    assert original.status == "refused"
    assert original.reason == "cannot emulate: cuBLAS (cublas_v2.h) (main.cu line 2)"
    assert report.runs[0].originals == []
    assert report.verdicts()["hip"]["status"] == "not-run"


def test_the_executable_a_run_names_and_where_it_runs(smooth: Path) -> None:
    program = discover([str(smooth)])
    (main,) = main_units(program)
    assert program_names(program, main) == {"main", "smooth"}  # the unit's stem and the Makefile target
    assert run_folder(program, main) == Path(".")  # where the Makefile is
    assert choose(program, [main], RUN) == (main, ["data/values.txt", "4"])
    assert choose(program, [main], "data/values.txt 4") == (main, ["data/values.txt", "4"])
    assert choose(program, [main], "bin/prog x") == (main, ["x"])
    with pytest.raises(UsageError, match="--run"):
        choose(program, [main], "'unbalanced")


def test_bad_run_options_are_usage_errors(smooth: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--translate-only"):
        port_program(
            [str(smooth)], ["hip"], out_dir=str(tmp_path / "a"), run=ProgramRuns((RUN,)), translate_only=True
        )
    with pytest.raises(UsageError, match="--timeout"):
        port_program([str(smooth)], ["hip"], out_dir=str(tmp_path / "b"), run=ProgramRuns((RUN,), timeout=0))
    with pytest.raises(UsageError, match="unknown program toolchain"):
        port_program(
            [str(smooth)], ["hip"], out_dir=str(tmp_path / "c"), run=ProgramRuns((RUN,), toolchains=("nope",))
        )


def test_what_varies_between_two_runs_of_the_original_is_not_compared(tmp_path: Path) -> None:
    prog = tmp_path / "noisy"
    prog.mkdir()
    (prog / "main.cu").write_text(
        "#include <cstdio>\n#include <ctime>\n#include <cstdlib>\n"
        "__global__ void twice(int* x) { x[threadIdx.x] *= 2; }\n"
        "int main() {\n"
        "    struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts); srand((unsigned)ts.tv_nsec);\n"
        "    int h[4] = {1, 2, 3, 4}; int* d; cudaMalloc(&d, sizeof h);\n"
        "    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice); twice<<<1, 4>>>(d);\n"
        "    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
        '    printf("seed draw %d\\n", rand());\n'
        '    printf("result %d %d %d %d\\n", h[0], h[1], h[2], h[3]);\n'
        "    return 0;\n}\n"
    )
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "o"), run=cpu(""))
    original = report.runs[0].original
    assert original is not None and original.varies == [
        "stdout line 1 varies between two runs of the original: not compared",
        REORDERED,
    ]
    port = report.runs[0].variants[0]
    assert port.status == "matches" and port.reason == f"{UNCOMPARED} 1 stdout line(s)"
    assert report.verdicts()["hip"]["detail"].endswith(f" ({UNCOMPARED} 1 stdout line(s))")
    doc = json.loads((Path(report.out_dir) / "report.json").read_text())
    assert doc["program"]["runs"][0]["original"]["varies"] == original.varies


def test_the_originals_second_run_sees_the_wall_clock_shifted(tmp_path: Path) -> None:
    """A program seeding from time(0) prints the same in two runs in one second and not in the next: every run
    starts at one instant (porter.sandbox.clock), the original's second nine days later, so what is derived from
    the clock varies between the original's runs every time -- here the day number and a time(0)-seeded draw --
    and a port's run, started at the original's first instant, is compared on it too."""
    from porter.sandbox import clock

    prog = tmp_path / "seeded"
    prog.mkdir()
    (prog / "main.cu").write_text(
        "#include <cstdio>\n#include <ctime>\n#include <cstdlib>\n#include <sys/time.h>\n"
        "__global__ void twice(int* x) { x[threadIdx.x] *= 2; }\n"
        "int main() {\n"
        "    struct timeval t0, t1; gettimeofday(&t0, 0); srand((unsigned)time(0));\n"
        "    int h[4] = {1, 2, 3, 4}; int* d; cudaMalloc(&d, sizeof h);\n"
        "    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice); twice<<<1, 4>>>(d);\n"
        "    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost); gettimeofday(&t1, 0);\n"
        '    printf("day %ld\\n", (long)(time(0) / 86400));\n'
        '    printf("draw %d\\n", rand() % 1000);\n'
        '    printf("result %d %d %d %d\\n", h[0], h[1], h[2], h[3]);\n'
        '    printf("took under an hour: %d\\n", (int)(t1.tv_sec - t0.tv_sec < 3600));\n'
        "    return 0;\n}\n"
    )
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "o"), run=cpu(""))
    original = report.runs[0].original
    assert original is not None
    varies = " ".join(original.varies)
    # the day differs by nine (the draw too, unless the two seeds' draws collide modulo 1000); durations do not
    assert "stdout line 1 varies" in varies and "line 3" not in varies and "line 4" not in varies, varies
    # every run's clock starts at one instant: the port's run drew what the original's first drew, so it
    # matches on everything, the day and the draw included, whenever it ran
    port = report.runs[0].variants[0]
    assert port.status == "matches" and UNCOMPARED not in port.reason, port
    assert port.stdout_tail.startswith(f"day {clock.EPOCH // 86400}\n"), port.stdout_tail
    assert list((tmp_path / "o" / "build" / "clock").glob("porter_clock_shift-*.so"))
    assert clock.SHIFT_S > 86400 * 7
    assert [p.name for p in prog.iterdir()] == ["main.cu"]  # built and run in copies


@pytest.mark.skipif(shutil.which("make") is None, reason="the sample's own build needs make")
def test_the_users_own_build_runs_with_porters_compiler_drivers(smooth: Path, tmp_path: Path) -> None:
    report = port_program(
        [str(smooth)], ["hip"], out_dir=str(tmp_path / "o"), run=cpu(RUN, build_command="make")
    )
    built = [(b.variant, b.status, sorted(b.executables)) for b in report.builds]
    # the Makefile's target, the HIP port at 32 and at 64 lanes
    assert built == [
        ("original", "built", ["smooth"]),
        ("hip", "built", ["smooth"]),
        ("hip", "built", ["smooth"]),
    ]
    assert report.builds[0].commands == ["make"]
    # the user's own build records no launches by design: not a capturing build that failed
    assert not any("capturing build" in n for n in report.notes), report.notes
    log = (tmp_path / "o" / "build" / "original" / "cpu-runtime" / "drivers.log").read_text()
    assert "-include porter_runtime.h" in log and "src/main.cu" in log  # nvcc's line, through the driver
    assert report.verdicts()["hip"]["status"] == "matches"
    assert not (smooth / "smooth").exists()  # built in a copy: the user's tree has no new file
    failed = port_program(
        [str(smooth)],
        ["hip"],
        out_dir=str(tmp_path / "p"),
        run=cpu(RUN, build_command="exit 3"),
    )
    assert failed.builds[0].status == "failed" and failed.builds[0].reason == "--build 'exit 3' exited with 3"


def test_one_file_with_a_run_is_a_program_and_what_lies_beside_it_is_never_read(tmp_path: Path) -> None:
    import os

    (tmp_path / "va.cu").write_text(
        "#include <cstdio>\n__global__ void add(const float* a, float* b, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] += a[i]; }\n"
        "int main() { const int n = 100; float h[n]; for (int i = 0; i < n; ++i) h[i] = i;\n"
        "    float *a, *b; cudaMalloc(&a, sizeof h); cudaMalloc(&b, sizeof h);\n"
        "    cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice); cudaMemcpy(b, h, sizeof h, cudaMemcpyHostToDevice);\n"
        "    add<<<1, 128>>>(a, b, n); cudaMemcpy(h, b, sizeof h, cudaMemcpyDeviceToHost);\n"
        '    printf("%g\\n", h[99]); return h[99] == 198.0f ? 0 : 1; }\n'
    )
    os.mkfifo(tmp_path / "pipe")  # a FIFO beside the file: opening it would block for ever
    report = port_program([str(tmp_path / "va.cu")], ["hip"], run=cpu(""))
    assert report.runs[0].original is not None and report.runs[0].original.stdout_tail.strip() == "198"
    assert report.verdicts()["hip"]["status"] == "matches"


def test_a_port_whose_original_did_not_build_says_why_the_original_did_not_run(tmp_path: Path) -> None:
    """The original does not build (here: an #error behind a CUDA version test, which the HIP port takes
    the fallback of), the port builds and runs: its verdict is not-run, naming the original's failed
    build with its toolchain, not only "the original did not run here"."""
    prog = tmp_path / "versioned"
    prog.mkdir()
    (prog / "main.cu").write_text(
        "#include <cstdio>\n"
        "#if CUDART_VERSION >= 11000\n#error this test wants the original not to build\n#endif\n"
        "__global__ void k(int* x) { x[threadIdx.x] = 1; }\n"
        "int main() { int* d; cudaMalloc(&d, 4 * sizeof(int)); k<<<1, 4>>>(d); cudaDeviceSynchronize();\n"
        '  puts("PASS"); return 0; }\n'
    )
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "o"), run=cpu(""))
    original = next(b for b in report.builds if b.variant == "original")
    assert original.status == "failed" and "main.cu" in original.reason
    hip = next(v for v in report.runs[0].variants if v.variant == "hip")
    assert hip.status == "not-run"
    assert hip.reason.startswith("the original did not run here (cpu-runtime: "), hip.reason
    assert original.reason in hip.reason


# A host program of ours whose original prints a heap buffer it never terminated (the shape of a read-a-file-
# then-print-it bug), and a kernel: what lies past the buffer depends on the runtime's allocations before it.
UNTERMINATED = """#include <cstdio>
#include <cstdlib>
#include <cstring>
__global__ void twice(int* x) { x[threadIdx.x] *= 2; }
int main() {
  int h[4] = {1, 2, 3, 4}, *d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  twice<<<1, 4>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  char* word = (char*)malloc(5);
  memcpy(word, "hello", 5);
  printf("%s\\n", word);
  printf("%d\\n", h[3]);
  return 0;
}
"""


def _planted_run(tmp_path: Path, name: str, source: str, old: str, new: str) -> ProgramReport:
    """Our one-file program `source` in ``tmp_path/name``, ported to HIP with `old` replaced by `new` in the port
    (a planted difference), then built and run on the CPU runtime: its report."""
    prog = tmp_path / name
    prog.mkdir()
    (prog / "main.cu").write_text(source)
    out = tmp_path / "out"
    report, hip = _ported(prog, out)
    main = hip / "main.cu"
    main.write_text(main.read_text().replace(old, new))
    assert isinstance(report, ProgramReport)
    report.builds.clear()
    build_and_run(discover([str(prog)]), out, report, cpu(f"./{name}"), ledger=Ledger())
    return report


# Ours: a command string copied into a buffer of its length, no terminating 0, then scanned one character at
# a time until sscanf says EOF -- how far it reads depends on the bytes behind the buffer (the shape of
# Rodinia's b+tree reading its command file). AddressSanitizer's own sscanf does not check its input.
SCANNED = """#include <cstdio>
#include <cstdlib>
#include <cstring>
__global__ void inc(int* x) { x[threadIdx.x] += 1; }
int main() {
  const char text[] = "ab ab";
  char* commands = (char*)malloc(sizeof text - 1);
  memcpy(commands, text, sizeof text - 1);
  int *d, h[2] = {0, 0};
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  char c;
  for (char* p = commands; sscanf(p, "%c", &c) != EOF; ++p)
    if (c == 'a') inc<<<1, 2>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%d %d\\n", h[0], h[1]);
  return 0;
}
"""


@pytest.mark.parametrize(
    ("planted", "status"),
    [("h[0], h[1] + 1);", "differs"), ("h[0], h[1]); abort();", "failed")],
    ids=["differs", "crashes"],
)
def test_a_scan_past_an_unterminated_buffer_is_named_as_the_originals_memory_error(
    tmp_path: Path, planted: str, status: str
) -> None:
    """A port whose run differs, or crashes (planted), of an original that scans a buffer it never terminated
    with sscanf: the original's sanitized run names the read past the buffer at the sscanf's line, and the
    allocation's, in the port's program verdict."""
    report = _planted_run(tmp_path, "scanned", SCANNED, "h[0], h[1]);", planted)
    assert next(v for v in report.runs[0].variants if v.variant == "hip").status == status
    (found,) = report.original_defects
    assert found.startswith(
        "AddressSanitizer: heap-buffer-overflow, a READ of 1 byte at main.cu:13 (in main)"
    )
    assert "0 bytes past the end of a 5-byte region allocated at main.cu:7" in found, found
    verdict = report.verdicts()["hip"]
    assert verdict["status"] == status and "the original's own code has a memory error" in verdict["detail"]
    assert "main.cu:13" in verdict["detail"], verdict


# Ours: a read one past a stack array -- an error AddressSanitizer reports and porter does not name (stack
# kinds are not believed: the runtime's fibers run kernels on stacks of their own), which stops the run.
ON_THE_STACK = """#include <cstdio>
#include <cstring>
__global__ void inc(int* x) { x[threadIdx.x] += 1; }
int main(int argc, char** argv) {
  int *d, h[2] = {0, 0};
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  inc<<<1, 2>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  char bytes[16];
  volatile size_t n = sizeof h + 4 * argc;
  memcpy(bytes, h, n);
  printf("%d %d %d\\n", h[0], h[1], bytes[0]);
  return 0;
}
"""


def test_a_sanitized_run_that_stops_early_is_said_to_have_stopped_not_to_be_clean(tmp_path: Path) -> None:
    """A port's run differs (planted); the original's sanitized run stops at an error porter does not name: the
    note says how it ended against the original's run, with its last line, and claims no clean check."""
    report = _planted_run(tmp_path, "stack", ON_THE_STACK, "h[0], h[1],", "h[0] + 1, h[1],")
    assert next(v for v in report.runs[0].variants if v.variant == "hip").status == "differs"
    assert report.original_defects == []
    (note,) = [n for n in report.notes if "built with cpu-runtime-asan" in n]
    assert "where the original's run exited 0" in note and "stack-buffer-overflow" in note, note
    assert note.endswith("no memory error of its own code found before that"), note


def test_a_differing_port_has_the_originals_memory_errors_checked_and_named(tmp_path: Path) -> None:
    """A port's run differs (planted here): the original runs once more built with AddressSanitizer; its read
    past a heap allocation is named with the file and line of the access and of the allocation, in the
    verdict and the notes.  The smooth sample's original, with a planted difference too, is checked and
    found clean: nothing is named."""
    done = _planted_run(tmp_path, "unterminated", UNTERMINATED, '"%d\\n", h[3]);', '"%d\\n", h[3] + 1);')
    assert next(v for v in done.runs[0].variants if v.variant == "hip").status == "differs"
    assert [(b.variant, b.toolchain, b.status) for b in done.builds][-1] == (
        "original",
        "cpu-runtime-asan",
        "built",
    )
    (found,) = done.original_defects
    assert found.startswith("AddressSanitizer: heap-buffer-overflow, a READ of ")
    assert (
        "at main.cu:13 (in main)" in found
        and "past the end of a 5-byte region allocated at main.cu:11" in found
    )
    detail = done.verdicts()["hip"]["detail"]
    assert "the original's own code has a memory error" in detail and "main.cu:13" in detail
    assert any("cpu-runtime-asan" in n and "heap-buffer-overflow" in n for n in done.notes)
    assert done.document()["program"]["original_defects"] == done.original_defects
    # a clean original with a differing port: checked, nothing named
    smooth = tmp_path / "smooth"
    shutil.copytree(SMOOTH, smooth)
    clean_out = tmp_path / "clean"
    clean, hip = _ported(smooth, clean_out)
    src = hip / "src" / "main.cu"
    src.write_text(src.read_text().replace('printf("n = %d\\n", n);', 'printf("n = %d\\n", n + 1);'))
    checked = _rerun(smooth, clean_out, clean)
    assert isinstance(checked, ProgramReport) and checked.original_defects == []
    assert any("no memory error of its own code found" in n for n in checked.notes), checked.notes


# Ours: the file name kept in a buffer one byte short (strlen, no room for the 0), the shape of Rodinia's dwt2d
# (main.cu: `malloc(strlen(argv[0]))` then strcpy).  Ubuntu's gcc fortifies by default (-D_FORTIFY_SOURCE=3 at
# -O1 and up): glibc stops the program there, before any kernel runs.  Unchecked, the byte lands in malloc's
# padding and the program does its work.
ONE_SHORT = """#include <cstdio>
#include <cstdlib>
#include <cstring>
__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 2.0f * x[i] + 1.0f; }
int main(int argc, char** argv) {
  char* name = (char*)malloc(strlen(argv[1]));
  strcpy(name, argv[1]);
  float h[8], *d;
  for (int i = 0; i < 8; ++i) h[i] = (float)i;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  scale<<<1, 8>>>(d, 8);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%s: %g %g\\n", name, h[0], h[7]);
  return 0;
}
"""


def test_an_original_glibc_stops_for_a_buffer_overflow_is_built_again_without_the_check_and_named(
    tmp_path: Path,
) -> None:
    """Fortified as Ubuntu's compiler does by default (-D_FORTIFY_SOURCE=3 given here: Debian's does not), the
    original dies in glibc's check before its kernel runs.  Porter says so, builds and runs every variant again
    with -D_FORTIFY_SOURCE=0, compares them and replays the kernel; AddressSanitizer names the write's line."""
    from porter.defines import BuildFlags

    prog = tmp_path / "short"
    prog.mkdir()
    (prog / "main.cu").write_text(ONE_SHORT)
    report = port_program(
        [str(prog)], ["hip"], out_dir=str(tmp_path / "out"), flags=BuildFlags(defines=("_FORTIFY_SOURCE=3",)),
        run=cpu("./short input.bmp"),
    )  # fmt: skip
    (run,) = report.runs
    assert (
        run.original is not None
        and run.original.status == "ran"
        and "input.bmp: 1 15" in run.original.stdout_tail
    )
    assert {v.status for v in run.variants if v.variant == "hip"} == {"matches"}
    stopped, *named = report.original_defects
    assert stopped.startswith("glibc stopped the original (*** buffer overflow detected ***)"), stopped
    assert "run 1 (./short input.bmp) on cpu:cpu-emulator" in stopped, stopped
    assert any("heap-buffer-overflow" in d and "main.cu:7" in d for d in named), report.original_defects
    note = next(n for n in report.notes if n.startswith(stopped))
    assert "built again with -D_FORTIFY_SOURCE=0" in note
    assert all(b.status == "built" for b in report.builds if b.toolchain == "cpu-runtime")
    scale = next(k for k in report.kernels if k.name == "scale")
    assert {r.variant: r.status for r in scale.replays} == {"original": "validated", "hip": "validated"}
    # run again into the same folder: both passes resumed, the same verdicts and defects, nothing said twice
    again = port_program(
        [str(prog)], ["hip"], out_dir=str(tmp_path / "out"), flags=BuildFlags(defines=("_FORTIFY_SOURCE=3",)),
        run=cpu("./short input.bmp"),
    )  # fmt: skip
    assert again.original_defects == report.original_defects
    assert all(r.resumed for r in [*again.runs[0].originals, *again.runs[0].variants])
    assert again.verdicts()["hip"]["status"] == report.verdicts()["hip"]["status"] == "matches"
