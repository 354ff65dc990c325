"""Whole programs are built and run in the program jail (porter.sandbox.jail): a project's Makefile, the
toolchains' compiler runs over its tree and every ``--run`` see the system read-only, their own copy and
what the user named -- not the home folder, other files, or the network -- and print at most
``--max-output`` MiB.

The security probe that opened this found ``--build`` running a project's Makefile outside the jail (a
canary file written, ``~/.bashrc`` copied), ``--run`` programs reading the whole file system with their
stdout kept in report.json, and a program printing 1 GB taking 5.5 GB of porter's memory, 3.1 GB of disk
and running past ``--timeout``.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from porter import sandbox
from porter.errors import PorterError
from porter.program import discover
from porter.results import ProgramReport
from porter.sandbox import jail
from porter.workflows.capture import capture_program
from porter.workflows.program_run import TAIL_CHARS, ProgramRuns, build_and_run
from porter.workflows.resume import Ledger

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]

CPU = ["cpu-runtime"]
SECRET = "Zq7-hunter2-home-secret-91f3"
TOKEN = "tok-Zq7hunter2-91f3-abcdef0123"

# A CUDA program that prints the first line of each file its arguments name (or that it cannot).
READER = """#include <cstdio>
__global__ void touch(int* x) { x[0] = 1; }
int main(int argc, char** argv) {
    int* d;
    cudaMalloc(&d, sizeof(int));
    touch<<<1, 1>>>(d);
    cudaDeviceSynchronize();
    for (int i = 1; i < argc; ++i) {
        FILE* f = fopen(argv[i], "r");
        if (!f) { printf("%s: cannot open\\n", argv[i]); continue; }
        char line[256];
        if (fgets(line, sizeof line, f)) printf("%s: %s", argv[i], line);
        fclose(f);
    }
    return 0;
}
"""

# A CUDA program that prints for ever.
ENDLESS = """#include <cstdio>
__global__ void touch(int* x) { x[0] = 1; }
int main() {
    int* d;
    cudaMalloc(&d, sizeof(int));
    touch<<<1, 1>>>(d);
    cudaDeviceSynchronize();
    for (;;) fputs("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\\n", stdout);
}
"""


# `porter ARGS` run as a child whose peak resident memory, and its children's, goes to the file argv[1].
MEASURED = """
import resource, subprocess, sys
code = subprocess.run([sys.executable, "-m", "porter", *sys.argv[2:]]).returncode
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Porter's HOME: a folder holding a ~/.bashrc and a secret file."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / ".bashrc").write_text(f"export SECRET={SECRET}\n")
    (folder / "secret.txt").write_text(f"{SECRET}\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the program, not part of it, holding a secret."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(f"{SECRET}\n")
    return folder


def _program(folder: Path, main: str, makefile: str = "") -> Path:
    folder.mkdir(parents=True)
    (folder / "main.cu").write_text(main)
    if makefile:
        (folder / "Makefile").write_text(makefile)
    return folder


def _build_and_run(prog: Path, out: Path, runs: list[str], **options: object) -> tuple[ProgramReport, str]:
    """The original program built (and run) with the CPU runtime; (the report, report.json's text)."""
    program = discover([str(prog)])
    report = ProgramReport(root=str(program.root), out_dir=str(out), targets=())
    out.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        (out / "report.json").write_text(json.dumps(report.document()))

    run = ProgramRuns(runs=tuple(runs), toolchains=tuple(CPU), **options)  # type: ignore[arg-type]
    build_and_run(program, out, report, run, ledger=Ledger(), save=save)
    return report, (out / "report.json").read_text()


def _hostile_makefile(canary: Path, home: Path) -> str:
    return (
        "main: main.cu\n"
        f"\t-cp {home}/.bashrc stolen_bashrc\n"
        f"\techo pwned > {canary}\n"
        "\t$(NVCC) -o main main.cu\n"
    )


# ------------------------------------------------------------------------------------- builds (item 3)


def test_a_makefile_cannot_write_outside_its_copy_nor_read_the_home_folder(
    tmp_path: Path, home: Path, outside: Path
) -> None:
    if jail.mode()[0] != "bubblewrap":
        pytest.skip("bubblewrap cannot make the program jail here")
    canary = outside / "canary"
    prog = _program(tmp_path / "prog", READER, _hostile_makefile(canary, home))
    report, text = _build_and_run(prog, tmp_path / "out", [], build_command="make")
    assert not canary.exists()  # the recipe's write was refused
    assert report.build["jail"].startswith("bubblewrap: builds and runs see the system")
    (build,) = report.builds
    assert build.status == "failed" and build.reason == "--build 'make' exited with 2"
    assert str(canary) in build.log and "No such file or directory" in build.log  # why, in the report
    stolen = list(tmp_path.rglob("stolen_bashrc"))
    assert not stolen or all(SECRET not in p.read_text() for p in stolen)
    assert SECRET not in text
    assert not (prog / "main").exists() and sorted(p.name for p in prog.iterdir()) == ["Makefile", "main.cu"]


def test_the_toolchains_own_build_reads_nothing_outside_the_program(
    tmp_path: Path, home: Path, outside: Path
) -> None:
    (outside / "secret.h").write_text(f'#define SECRET "{SECRET}"\n')
    main = READER.replace("#include <cstdio>", f'#include <cstdio>\n#include "{outside}/secret.h"')
    prog = _program(tmp_path / "prog", main)
    report, text = _build_and_run(prog, tmp_path / "out", [])
    (build,) = report.builds
    assert build.status == "failed" and "secret.h" in build.log  # the compiler, jailed, could not read it
    assert SECRET not in text


def test_without_bubblewrap_builds_run_under_landlock_and_the_report_says_so(
    tmp_path: Path, home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sandbox._landlock_abi() <= 0:
        pytest.skip("Landlock is not available in this kernel")
    monkeypatch.setenv(sandbox.DISABLE_ENV, "bubblewrap")
    canary = outside / "canary"
    prog = _program(tmp_path / "prog", READER, _hostile_makefile(canary, home))
    report, text = _build_and_run(prog, tmp_path / "out", [], build_command="make")
    assert not canary.exists()
    assert report.builds[0].status == "failed" and "Permission denied" in report.builds[0].log
    assert any("not in bubblewrap's jail" in n and "Landlock" in n for n in report.notes)
    assert SECRET not in text


def test_require_sandbox_refuses_to_build_without_bubblewrap(
    tmp_path: Path, home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox.DISABLE_ENV, "bubblewrap")
    monkeypatch.setenv(sandbox.REQUIRE_ENV, "1")
    canary = outside / "canary"
    prog = _program(tmp_path / "prog", READER, _hostile_makefile(canary, home))
    with pytest.raises(
        PorterError, match="--require-sandbox: program builds and runs need bubblewrap"
    ) as err:
        _build_and_run(prog, tmp_path / "out", [], build_command="make")
    assert err.value.exit_code == 2
    assert not canary.exists() and not (tmp_path / "out" / "build").exists()


# ------------------------------------------------------------------------------------- runs (item 5)


def test_a_run_reads_only_its_copy_and_the_data_folders_given(
    tmp_path: Path, home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if jail.mode()[0] != "bubblewrap":
        pytest.skip("bubblewrap cannot make the program jail here")
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)  # a secret of porter's environment
    prog = _program(tmp_path / "prog", READER)
    (prog / "data").mkdir()
    (prog / "data" / "token.txt").write_text(f"{TOKEN}\n")
    paths = [home / "secret.txt", outside / "secret.txt", Path("/etc/shadow"), Path("data/token.txt")]
    run = "./main " + " ".join(map(str, paths))
    report, text = _build_and_run(prog, tmp_path / "out", [run])
    original = report.runs[0].original
    assert original is not None and original.status == "ran" and original.exit == 0
    lines = original.stdout_tail.splitlines()
    assert lines[:3] == [f"{p}: cannot open" for p in paths[:3]]
    assert lines[3] == "data/token.txt: [REDACTED]"  # its own file, read; the secret value masked
    assert SECRET not in text and TOKEN not in text
    # with --data, the folder named is readable (and only it)
    report, text = _build_and_run(prog, tmp_path / "out2", [run], data=(str(outside),))
    lines = report.runs[0].original.stdout_tail.splitlines()  # type: ignore[union-attr]
    assert lines[0] == f"{home / 'secret.txt'}: cannot open"
    assert lines[1] == f"{outside / 'secret.txt'}: {SECRET}"


def test_a_run_cannot_write_outside_its_copy(tmp_path: Path, outside: Path) -> None:
    prog = _program(
        tmp_path / "prog",
        READER.replace(
            "    return 0;\n}",
            f'    FILE* w = fopen("{outside}/written", "w");\n    printf("write: %s\\n", w ? "ok" : "refused");\n'
            "    return 0;\n}",
        ),
    )
    report, _text = _build_and_run(prog, tmp_path / "out", ["./main"], data=(str(outside),))
    assert report.runs[0].original is not None and "write: refused" in report.runs[0].original.stdout_tail
    assert not (outside / "written").exists()  # --data folders are read-only


# ------------------------------------------------------------------------------------- output (item 6)


def test_a_program_printing_for_ever_is_stopped_at_the_cap(tmp_path: Path) -> None:
    prog = _program(tmp_path / "prog", ENDLESS)
    out = tmp_path / "out"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    report, text = _build_and_run(prog, out, [""], max_output=1 << 20, timeout=120)
    seconds = time.monotonic() - start
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    original = report.runs[0].original
    assert original is not None and original.status == "failed" and original.exit is None
    assert original.reason == "printed more than 1 MiB to stdout (--max-output): stopped"
    assert seconds < 60  # stopped at the cap, long before --timeout
    assert grown_kib < 200 * 1024  # porter's memory stays small
    assert len(original.stdout_tail) <= TAIL_CHARS + 3 and len(text) < 200_000
    on_disk = sum(p.stat().st_size for p in (out / "runs").rglob("*") if p.is_file())
    assert on_disk <= (1 << 20) + 64 * 1024  # what it printed, up to the cap, and no more


def test_capture_stops_a_run_at_the_cap_too(tmp_path: Path) -> None:
    prog = _program(tmp_path / "prog", ENDLESS)
    report = capture_program(
        [str(prog)],
        ProgramRuns(("",), max_output=1 << 20),
        out_dir=str(tmp_path / "cap"),
        toolchain="cpu-runtime",
    )
    (run,) = report.runs
    assert run.status == "failed" and run.exit is None
    assert run.reason == "printed more than 1 MiB to stdout (--max-output): stopped"
    assert report.exit_code == 1


def test_port_max_output_from_the_command_line(tmp_path: Path) -> None:
    """`porter port DIR --run ... --max-output 1`, as a user runs it: stopped, reported, small."""
    prog = _program(tmp_path / "prog", ENDLESS)
    out = tmp_path / "out"
    args = ["port", str(prog), "--to", "hip", "--toolchains", "cpu-runtime", "--out", str(out), "--json"]
    args += ["--run", "", "--max-output", "1", "--timeout", "200"]
    peak = tmp_path / "peak"
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", MEASURED, str(peak), *args], capture_output=True, text=True, timeout=600,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "200"},
    )  # fmt: skip
    seconds = time.monotonic() - start
    peak_mib = int(peak.read_text()) / 1024
    assert r.returncode in (0, 1), r.stderr[-2000:]
    doc = json.loads(r.stdout)
    (run,) = doc["program"]["runs"]
    assert run["original"]["reason"] == "printed more than 1 MiB to stdout (--max-output): stopped"
    assert run["variants"][0]["status"] == "not-run" and "--max-output" in run["variants"][0]["reason"]
    assert seconds < 200
    assert peak_mib < 1500  # porter, its compilers and children: none near the gigabytes of the probe
    on_disk = sum(p.stat().st_size for p in (out / "runs").rglob("*") if p.is_file())
    assert on_disk <= (1 << 20) + 64 * 1024
