"""Porter's command line: arguments in, a workflow call, rendering out. No logic of its own."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from porter import __version__, tempdirs
from porter.errors import PorterError, UsageError
from porter.sandbox.environment import one_blas_thread

app = typer.Typer(
    name="porter",
    help="Move GPU kernels between vendors, make them faster, and prove every result on real hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"porter {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache", help="Bypass the compile/LLM cache (sets PORTER_NO_CACHE=1 for children)."
        ),
    ] = False,
    require_sandbox: Annotated[
        bool,
        typer.Option(
            "--require-sandbox",
            help="Refuse to compile or run any code unless every sandbox layer is active here "
            "(see `porter doctor`).",
        ),
    ] = False,
) -> None:
    """Porter scans CUDA and Python code, translates kernels to HIP and OpenCL, asks an LLM for what rules
    cannot do, and compiles, runs and validates every variant on the hardware present."""
    if no_cache:
        os.environ["PORTER_NO_CACHE"] = "1"
    if require_sandbox:
        from porter import sandbox

        os.environ[sandbox.REQUIRE_ENV] = "1"  # children refuse too, should a layer fail there
        try:
            sandbox.require()
        except sandbox.SandboxError as err:
            raise PorterError(str(err), exit_code=2) from None


# Options that port and optimize (every command that talks to a model) spell alike.
BaseUrlOption = Annotated[
    str | None, typer.Option("--base-url", help="The API endpoint (an OpenAI-compatible server...).")
]
ReplayOption = Annotated[
    Path | None, typer.Option("--replay", help="Serve replies recorded with --record; no network, no key.")
]
RecordOption = Annotated[Path | None, typer.Option("--record", help="Record every reply to this folder.")]
# Options of the commands that build and run whole programs (port --run, capture).
MaxOutputOption = Annotated[
    int,
    typer.Option(
        "--max-output",
        min=1,
        help="MiB a run (or a build command) may print to stdout, and to stderr: past it, it is stopped and "
        "failed.",
    ),
]
DefineOption = Annotated[
    list[str] | None,
    typer.Option(
        "-D",
        "--define",
        help="Define a macro for every unit, as nvcc -D does: NAME or NAME=VALUE (repeatable); it "
        "replaces the same macro of a compile_commands.json.",
    ),
]
UndefineOption = Annotated[
    list[str] | None,
    typer.Option(
        "-U", "--undefine", help="Drop a macro a compile_commands.json defines, as nvcc -U does (repeatable)."
    ),
]
DataOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--data",
        help="A folder the program's runs may read (read-only; repeatable). Runs see only their own copy "
        "of the program, the system and these. One outside the program's folder is also at the same "
        "relative path from the copy as from the program (../../data stays ../../data); where it cannot "
        "be (it holds the program's folder), the report's notes say so.",
    ),
]
IncludeOption = Annotated[
    list[Path] | None, typer.Option("-I", "--include", help="Include directory for headers; repeatable.")
]
RunTimeoutOption = Annotated[
    float | None, typer.Option("--timeout", help="Seconds each --run may take (default 300).")
]
RtolOption = Annotated[
    float | None,
    typer.Option("--rtol", help="Relative tolerance for numbers in compared runs (default 1e-4)."),
]
AtolOption = Annotated[
    float | None,
    typer.Option("--atol", help="Absolute tolerance for numbers in compared runs (default 1e-6)."),
]
ProgramToolchainsOption = Annotated[
    str | None,
    typer.Option(
        "--toolchains",
        help="Program toolchains to build with, comma-separated (cpu-runtime [both widths], cpu-runtime-wave64, "
        "nvcc, hip-on-cuda, hipcc; default: every one here).",
    ),
]
CaptureLaunchesOption = Annotated[
    int,
    typer.Option(
        "--capture-launches", min=1, help="With --run: launches of each kernel captured and replayed."
    ),
]
CaptureMibOption = Annotated[
    int,
    typer.Option(
        "--capture-mib",
        min=1,
        help="With --run: at most this many MiB of arrays per captured launch, once a launch of its kernel is "
        "kept (see --capture-first-mib).",
    ),
]
CaptureFirstMibOption = Annotated[
    int,
    typer.Option(
        "--capture-first-mib",
        min=1,
        help="With --run: at most this many MiB of arrays for a kernel's launch while none of its launches is "
        "kept, so every kernel is judged once at the program's own size (at least --capture-mib).",
    ),
]
ExpectExitOption = Annotated[
    int,
    typer.Option(
        "--expect-exit",
        help="With --run: the exit status of the original when it works (default 0); a run that exits "
        "otherwise is no evidence, and nothing is compared with it.",
    ),
]
ExclusiveOption = Annotated[
    bool,
    typer.Option(
        "--exclusive",
        help="Time on each GPU one kernel at a time (porter's own timings never overlap); times taken "
        "while other processes use the GPU are still marked contended.",
    ),
]
FreshOption = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Start over, ignoring the previous report in the output folder (a re-run otherwise keeps "
        "what that report verified for the same inputs and does only the rest).",
    ),
]
# The defaults of porter.llm.base (DEFAULT_TIMEOUT, DEFAULT_RETRIES), spelled here so that the command line
# starts without importing the llm layer (a unit test keeps them equal).
DEFAULT_REQUEST_TIMEOUT = 60.0
DEFAULT_RETRIES = 2
RequestTimeoutOption = Annotated[
    float,
    typer.Option(
        "--request-timeout",
        metavar="SECONDS",
        help="Seconds to wait for each request to the model before it is retried or given up.",
    ),
]
RetriesOption = Annotated[
    int,
    typer.Option(
        "--retries",
        min=0,
        metavar="N",
        help="Retries of a request after a timeout, a connection failure, a 429 or a 5xx (with backoff); "
        "a server that never answers is given up on after (N+1) x --request-timeout.",
    ),
]


def _exclusive(on: bool) -> None:
    if on:
        from porter.harness.contention import set_exclusive

        set_exclusive(True)


def show(report: Any, view: Any, json_out: bool) -> NoReturn:
    """Print `report` through its view (one JSON document with ``--json``, tables otherwise) and exit
    with the view's code for it."""
    if json_out:
        emit_json(view.to_json(report))
    else:
        view.render(report)
    raise typer.Exit(view.exit_code(report))


def emit_json(doc: object) -> None:
    """Indented for a terminal; one line when piped (the standard library's C encoder only runs
    without indentation, and indenting a multi-MB scan took longer than the scan itself)."""
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(doc, indent=indent) + "\n")


@app.command()
def scan(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (searched recursively).")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Worker processes for large trees (0: one per CPU; 1: scan in this process).",
            min=0,
        ),
    ] = 0,
    include: Annotated[
        list[Path] | None,
        typer.Option(
            "-I",
            "--include",
            help="Where to look for included headers (for macros such as `#define KERNEL __global__`).",
        ),
    ] = None,
    define: DefineOption = None,
    undefine: UndefineOption = None,
) -> None:
    """Map kernels, launch sites, allocations, Python loop nests and portability hazards."""
    from porter.report import scan_view
    from porter.scan import scan_paths

    result = scan_paths(
        [str(p) for p in paths],
        jobs=jobs,
        include_dirs=include or (),
        defines=define or (),
        undefines=undefine or (),
    )
    if json_out:
        emit_json(scan_view.to_json(result))
        scan_view.render_problems(result)
    else:
        scan_view.render(result)
    raise typer.Exit(scan_view.exit_code(result))


@app.command()
def doctor(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    rotate_state_key: Annotated[
        bool,
        typer.Option(
            "--rotate-state-key",
            help="Make a new state key (the secret that signs caches and reports) and exit: everything "
            "signed with the old one is recomputed.",
        ),
    ] = False,
) -> None:
    """Every backend: the toolchains and devices found, whether it can compile and run, what to install."""
    from porter.report import doctor_view
    from porter.workflows.doctor import doctor as run_doctor

    if rotate_state_key:
        from porter.signing import rotate

        typer.echo(f"porter: a new state key is in {rotate()}; cache entries and reports signed with the "
                   "old one will be recomputed")  # fmt: skip
        return
    report = run_doctor()
    show(report, doctor_view, json_out)


@app.command()
def check(
    variant: Annotated[
        Path, typer.Argument(help="The variant: a .cu, .hip or .cl file (may hold only the kernel).")
    ],
    against: Annotated[
        Path,
        typer.Option(
            "--against",
            help="The original CUDA program (its host code or spec file says how to run the kernel).",
        ),
    ],
    kernel: Annotated[
        str | None, typer.Option("--kernel", help="The kernel to check (when ORIGINAL has several).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="Run the variant only on this backend (cuda, hip, opencl, cpu)."),
    ] = None,
    include: Annotated[
        list[Path] | None,
        typer.Option("-I", "--include", help="Include directory for the original's headers."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    capture: Annotated[
        Path | None,
        typer.Option(
            "--capture",
            help="Judge the variant on the launches of this capture of ORIGINAL's program (porter capture).",
        ),
    ] = None,
    define: DefineOption = None,
) -> None:
    """Validate VARIANT against ORIGINAL on every device that can run it (exit 0: validated, 1: rejected)."""
    from porter.backends import CompileOptions
    from porter.harness.validate import ValidateOptions
    from porter.report import check_view
    from porter.workflows.check import run_check

    result = run_check(
        str(variant),
        str(against),
        kernel=kernel,
        backend=backend,
        include_dirs=tuple(str(p) for p in include or ()),
        options=ValidateOptions(compile=CompileOptions(defines=tuple(define or ()))),
        capture_dir=str(capture) if capture is not None else None,
    )
    if json_out:
        emit_json(check_view.to_json(result))
    else:
        check_view.render(result)
    raise typer.Exit(check_view.exit_code(result))


@app.command()
def bench(
    file: Annotated[Path, typer.Argument(help="A CUDA source file (.cu).")],
    kernel: Annotated[str | None, typer.Option("--kernel", help="Only this kernel.")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    backend: Annotated[
        list[str] | None,
        typer.Option("--backend", help="Only these backends (cuda, hip, opencl, cpu); repeatable."),
    ] = None,
    size: Annotated[
        list[str] | None, typer.Option("--size", help="Bind a size symbol, e.g. --size n=1<<24; repeatable.")
    ] = None,
    include: Annotated[list[Path] | None, typer.Option("-I", help="Include directory; repeatable.")] = None,
    capture: Annotated[
        Path | None,
        typer.Option(
            "--capture",
            help="Time each kernel at the launches a program's run captured (porter capture's folder), with their data.",
        ),
    ] = None,
    define: DefineOption = None,
    exclusive: ExclusiveOption = False,
) -> None:
    """Predicted roofline floor of each kernel on every device of the table, then measured time,
    % of peak and the suspect flag on each device here that can run it; with --capture, at the sizes
    and data of the program's own launches."""
    _exclusive(exclusive)
    from porter.report import bench_view
    from porter.workflows.bench import bench_file, parse_sizes

    report = bench_file(
        str(file),
        kernel=kernel,
        backends=tuple(backend) if backend else None,
        sizes=parse_sizes(size or []),
        include_dirs=[str(p) for p in include or []],
        capture=str(capture) if capture is not None else None,
        defines=define or [],
    )
    show(report, bench_view, json_out)


@app.command()
def port(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="A CUDA source file (.cu), or a program: a folder, several files or a "
            "compile_commands.json. Inputs are never modified.",
            show_default=False,
        ),
    ] = None,
    suite: Annotated[
        Path | None,
        typer.Option(
            "--suite",
            help="Port every program of a suite file (or a folder holding suite.toml; docs/SUITES.md), each "
            "as `porter port DIR` does, into OUT/<name>/, with one summary (OUT/summary.md, summary.json, "
            "summary.png).",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "-j",
            "--jobs",
            min=1,
            help="With --suite: programs ported at once (default: one per core and 4 GB; on Ray, the "
            "cluster's CPUs).",
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="With --suite: local (a process per program here) or ray (a Ray task per program on a "
            "cluster's nodes; pip install 'porter-gpu[ray]'; docs/SUITES.md).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="With --executor ray: the cluster (HOST:PORT of its head; default RAY_ADDRESS; 'local' "
            "starts Ray here for this run).",
        ),
    ] = None,
    shared_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--shared-dir",
            help="With --executor ray: a folder every node sees at the same path; inputs under it are "
            "read in place instead of sent to the nodes; repeatable.",
        ),
    ] = None,
    ray_accelerator: Annotated[
        str | None,
        typer.Option(
            "--ray-accelerator",
            help="With --executor ray: the accelerator_type (e.g. H100) of the GPU a program whose "
            "toolchains need one asks for.",
        ),
    ] = None,
    per_gpu: Annotated[
        int | None,
        typer.Option(
            "--per-gpu",
            min=1,
            help="With --suite: programs that share one GPU at once (local: each program that may use a GPU "
            "is pinned to the least busy one, at most N a GPU; default no cap. Ray: a 1/N share of a GPU a "
            "task; default 1). GPU timings stay one at a time per GPU either way.",
        ),
    ] = None,
    to: Annotated[str, typer.Option("--to", help="Targets, comma-separated: hip, opencl.")] = "hip,opencl",
    include: IncludeOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <stem>.ported/ beside the input)."),
    ] = None,
    translate_only: Annotated[
        bool,
        typer.Option(
            "--translate-only", help="Write the translations and diagnostics; do not compile or run."
        ),
    ] = False,
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="Seeded input sets per problem size and device.")
    ] = 3,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="anthropic:<model> or openai:<model>: hand what the rules cannot translate to the model.",
        ),
    ] = None,
    base_url: BaseUrlOption = None,
    candidates: Annotated[
        int, typer.Option("--candidates", help="Concurrent candidates per kernel (with --model).")
    ] = 1,
    rounds: Annotated[
        int, typer.Option("--rounds", help="Rounds of generate, validate, repair (with --model).")
    ] = 3,
    replay: ReplayOption = None,
    record: RecordOption = None,
    max_dollars: Annotated[
        float | None, typer.Option("--max-dollars", help="Stop asking after this many US dollars.")
    ] = None,
    request_timeout: RequestTimeoutOption = DEFAULT_REQUEST_TIMEOUT,
    retries: RetriesOption = DEFAULT_RETRIES,
    fresh: FreshOption = False,
    hip_launch: Annotated[
        str,
        typer.Option(
            "--hip-launch",
            help="HIP launches: chevrons (<<<>>> kept) or ggl (hipLaunchKernelGGL, as hipify writes them).",
        ),
    ] = "chevrons",
    run: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            help='Run the built program with these arguments ("./prog ARGS" or ARGS) and compare each port\'s '
            "run with the original's; repeatable.",
        ),
    ] = None,
    timeout: RunTimeoutOption = None,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    build: Annotated[
        str | None,
        typer.Option(
            "--build",
            help='Build with your own command (e.g. "make") in a copy of each tree, NVCC/HIPCC/CXX/CC naming '
            "porter's compiler drivers (CPU runtime) or the toolchain's compiler.",
        ),
    ] = None,
    toolchains: ProgramToolchainsOption = None,
    capture_launches: CaptureLaunchesOption = 3,
    capture_mib: CaptureMibOption = 64,
    capture_first_mib: CaptureFirstMibOption = 1024,
    max_output: MaxOutputOption = 64,
    data: DataOption = None,
    define: DefineOption = None,
    undefine: UndefineOption = None,
    cmake_target: Annotated[
        str | None,
        typer.Option(
            "--cmake-target",
            help="With a compile_commands.json: port only the units of this CMake target (those whose object "
            "CMake writes under CMakeFiles/NAME.dir/).",
        ),
    ] = None,
    expect_exit: ExpectExitOption = 0,
    exclusive: ExclusiveOption = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Fail (exit 1, naming each) when a CUDA API name is left unmapped because the target has no "
            "equivalent; without it such names are kept, commented and reported.",
        ),
    ] = False,
) -> None:
    """Scan, translate, compile and validate every kernel of a CUDA FILE for each target on every device
    here (exit 0: every variant at least compiled, none failed; 1: some failed or untranslatable; 2: bad
    usage).  With --model, untranslatable kernels (and kernels on devices lacking what their translation
    needs) go to the model; its translations are validated against the original like any other variant.
    A folder, several files, a compile_commands.json or a file whose kernels live in its headers is
    ported as a program: a mirrored HIP tree, one OpenCL file per unit, each output with a kernel
    compiled, and one report for the program; the original and the HIP tree are built as programs
    (the CPU runtime everywhere; nvcc, HIP-on-CUDA or hipcc where present) and --run runs and compares
    them."""
    _exclusive(exclusive)
    from porter.errors import NoKernelError
    from porter.report import plain_console

    ray_options = (executor, ray_address, tuple(str(d) for d in shared_dir or ()), ray_accelerator)
    if cmake_target is not None and suite is not None:
        raise UsageError(
            "--cmake-target goes with a compile_commands.json, not --suite (a suite entry's key: cmake_target)"
        )
    if (
        suite is not None
        or jobs is not None
        or per_gpu is not None
        or ray_options != ("local", None, (), None)
    ):
        _port_suite(
            suite, paths or [], out, jobs, fresh, json_out, exclusive, strict, ray_options, per_gpu or 0
        )
    if not paths:
        raise UsageError(
            "give a CUDA file, a program (a folder, files, a compile_commands.json) or --suite FILE"
        )
    if cmake_target is not None and not any(p.name == "compile_commands.json" for p in paths):
        raise UsageError(
            f"--cmake-target {cmake_target} picks a target's units from a compile_commands.json; none is "
            "among the inputs",
            path=str(paths[0]),
        )
    err = plain_console(stderr=True)
    options = {"hip": {"launch": hip_launch}}
    # one path that is not a folder (a file, or what port_file refuses by its type: a FIFO, a device)
    single = len(paths) == 1 and not paths[0].is_dir() and paths[0].name != "compile_commands.json"
    if run and model is not None:
        raise UsageError("--run ports and runs a whole program; it cannot go with --model")
    if single and not run and undefine:
        raise UsageError(
            "-U drops a macro a compile_commands.json defines; a single file has none (leave out its -D)",
            path=str(paths[0]),
        )
    if single and not run:
        try:  # a file that defines its kernels: every kernel validated (exits here)
            _port_one(
                paths[0], to, include, out, translate_only, trials, json_out, model, base_url,
                candidates, rounds, replay, record, max_dollars, request_timeout, retries, fresh,
                options, err, define or [], strict,
            )  # fmt: skip
        except NoKernelError:  # its kernels live in its headers, or it is host code: a program
            if model is not None:
                raise
    elif model is not None:
        raise UsageError("--model takes one CUDA file that defines its kernels")
    chains = [c.strip() for c in toolchains.split(",") if c.strip()] if toolchains is not None else None
    _port_program(
        paths, to, include, out, translate_only, json_out, options, err, fresh, run or [], timeout, rtol,
        atol, chains, build or "", (capture_launches, capture_mib, capture_first_mib), max_output, data,
        define or [], undefine or [], expect_exit, strict=strict, cmake_target=cmake_target,
    )  # fmt: skip


def _port_suite(
    given: Path | None,
    paths: list[Path],
    out: Path | None,
    jobs: int | None,
    fresh: bool,
    json_out: bool,
    exclusive: bool,
    strict: bool,
    ray_options: tuple[str, str | None, tuple[str, ...], str | None] = ("local", None, (), None),
    per_gpu: int = 0,
) -> NoReturn:
    """`porter port --suite`: every program of the suite, `jobs` at a time, and the summary; with
    ``--executor ray`` each program a Ray task on a cluster (porter.workflows.suite_ray)."""
    from porter.report import suite_view
    from porter.workflows.suite import SuiteHooks, SuiteOptions, run_suite
    from porter.workflows.suite_file import default_jobs, load_suite

    executor, ray_address, shared, accelerator = ray_options
    if given is None:
        what = (
            "-j (programs at once)" if jobs is not None
            else "--per-gpu" if per_gpu else "--executor, --ray-address, --shared-dir"
        )  # fmt: skip
        raise UsageError(f"{what} goes with --suite")
    if paths:
        raise UsageError("--suite takes its programs from the suite file: give no PATHS beside it")
    if executor not in ("local", "ray"):
        raise UsageError(f"--executor {executor}: choose local or ray")
    if executor == "local" and (ray_address or shared or accelerator):
        raise UsageError("--ray-address, --shared-dir and --ray-accelerator go with --executor ray")
    for folder in shared:
        if not Path(folder).is_dir():
            raise UsageError("--shared-dir: not a folder", path=folder)
    forwarded = (("--strict",) if strict else ()) + (("--exclusive",) if exclusive else ())
    # on Ray, -j left out is 0: as many at once as the cluster has CPUs
    count = jobs or (0 if executor == "ray" else default_jobs())
    options = SuiteOptions(
        out, count, fresh, forwarded, executor=executor, ray_address=ray_address, shared_dirs=shared,
        ray_accelerator=accelerator, per_gpu=per_gpu,
    )  # fmt: skip
    programs = load_suite(given)
    if executor == "ray":
        from porter.workflows.suite_ray import run_suite_on_ray as run_suite
    with suite_view.JsonProgress() if json_out else suite_view.Progress() as progress:
        hooks = SuiteHooks(progress.update, suite_view.markdown, suite_view.chart)
        report = run_suite(programs, options, hooks)
    show(report, suite_view, json_out)


def _show_port(report: Any, view: Any, json_out: bool, err: Any, strict: bool) -> NoReturn:
    """Show a port's report; with --strict, exit 1 after naming each CUDA API name left unmapped."""
    if not strict:
        show(report, view, json_out)
    try:
        show(report, view, json_out)
    except typer.Exit as done:
        unmapped = report.unmapped_api()
        if not unmapped:
            raise
        err.print(
            f"porter: --strict: {len(unmapped)} CUDA API name(s) without an equivalent were left as written:"
        )
        for d in unmapped:
            err.print(f"  {d.path}:{d.line}: {d.construct}")
        raise typer.Exit(max(done.exit_code or 0, 1)) from None


def _port_program(
    paths: list[Path],
    to: str,
    include: list[Path] | None,
    out: Path | None,
    translate_only: bool,
    json_out: bool,
    options: dict[str, dict[str, str]],
    err: Any,
    fresh: bool = False,
    runs: list[str] | None = None,
    timeout: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    toolchains: list[str] | None = None,
    build_command: str = "",
    capture_limits: tuple[int, ...] | None = None,
    max_output: int = 64,
    data: list[Path] | None = None,
    defines: list[str] | None = None,
    undefines: list[str] | None = None,
    expect_exit: int = 0,
    verify_against: list[Path] | None = None,
    strict: bool = False,
    cmake_target: str | None = None,
) -> None:
    from porter.defines import BuildFlags
    from porter.harness.outputs import with_tolerance
    from porter.report import program_view
    from porter.workflows.program import Hooks, port_program
    from porter.workflows.program_run import DEFAULT_TIMEOUT_S, ProgramRuns

    run = ProgramRuns(
        runs=tuple(runs or ()),
        timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout,
        rule=with_tolerance(rtol, atol),
        toolchains=None if toolchains is None else tuple(toolchains),
        build_command=build_command,
        max_output=max_output << 20,
        data=tuple(str(d) for d in data or []),
        capture_limits=capture_limits or ProgramRuns.capture_limits,
        expect_exit=expect_exit,
    )
    flags = BuildFlags(
        tuple(str(p) for p in include or []), tuple(defines or ()), tuple(undefines or ()), cmake_target
    )
    out_dir = str(out) if out is not None else None
    hooks = Hooks(
        # counts and the time left on a terminal; quiet when piped (the report says it all)
        progress=(lambda msg: err.print(f"porter: {msg}", style="dim")) if sys.stderr.isatty() else None,
        markdown=program_view.markdown,
        chart=program_view.chart,
    )
    if verify_against:  # porter verify: `paths` is a port of the user's, checked against the original
        from porter.workflows.verify import verify_program

        report = verify_program(
            [str(p) for p in paths], [str(p) for p in verify_against], target=to, flags=flags,
            out_dir=out_dir, fresh=fresh, run=run, hooks=hooks,
        )  # fmt: skip
    else:
        report = port_program(
            [str(p) for p in paths], [to], flags=flags, out_dir=out_dir, translate_only=translate_only,
            translate_options=options, fresh=fresh, run=run, hooks=hooks,
        )  # fmt: skip
    _show_port(report, program_view, json_out, err, strict)


def _port_one(
    file: Path,
    to: str,
    include: list[Path] | None,
    out: Path | None,
    translate_only: bool,
    trials: int,
    json_out: bool,
    model: str | None,
    base_url: str | None,
    candidates: int,
    rounds: int,
    replay: Path | None,
    record: Path | None,
    max_dollars: float | None,
    request_timeout: float,
    retries: int,
    fresh: bool,
    options: dict[str, dict[str, str]],
    err: Any,
    defines: list[str] | None = None,
    strict: bool = False,
) -> None:
    from porter.defines import BuildFlags
    from porter.harness.validate import ValidateOptions
    from porter.report import port_view
    from porter.workflows.options import ModelOptions, OutputOptions, RunOptions
    from porter.workflows.port import port_file

    asked = (
        ModelOptions(
            model,
            base_url=base_url,
            replay=str(replay) if replay is not None else None,
            record=str(record) if record is not None else None,
            candidates=candidates,
            rounds=rounds,
            request_timeout=request_timeout,
            retries=retries,
            max_dollars=max_dollars,
        )
        if model is not None
        else None
    )
    report = port_file(
        str(file),
        [to],
        run=RunOptions(
            flags=BuildFlags(tuple(str(p) for p in include or ()), tuple(defines or ())),
            validate=ValidateOptions(trials=trials),
        ),
        output=OutputOptions(out_dir=str(out) if out is not None else None, fresh=fresh),
        model=asked,
        progress=lambda msg: err.print(f"porter: {msg}", style="dim"),
        translate_only=translate_only,
        translate_options=options,
    )
    _show_port(report, port_view, json_out, err, strict)


@app.command()
def verify(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="The port to check: a folder (or files, or a compile_commands.json) of HIP code."
        ),
    ],
    against: Annotated[
        list[Path],
        typer.Option(
            "--against",
            help="The original CUDA program the port was made from (a folder or files); repeatable.",
        ),
    ],
    to: Annotated[str, typer.Option("--to", help="The port's language (hip).")] = "hip",
    include: IncludeOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <port>.verified/ beside the port)."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    fresh: FreshOption = False,
    run: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            help='Run both programs with these arguments ("./prog ARGS" or ARGS) and compare the runs; '
            "repeatable.",
        ),
    ] = None,
    timeout: RunTimeoutOption = None,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    toolchains: ProgramToolchainsOption = None,
    capture_launches: CaptureLaunchesOption = 3,
    capture_mib: CaptureMibOption = 64,
    capture_first_mib: CaptureFirstMibOption = 1024,
    max_output: MaxOutputOption = 64,
    data: DataOption = None,
    define: DefineOption = None,
    undefine: UndefineOption = None,
    expect_exit: ExpectExitOption = 0,
    exclusive: ExclusiveOption = False,
) -> None:
    """Check a port someone else wrote (by hand, by hipify) against its CUDA original: both built as
    programs with every toolchain here (the HIP port on the CPU runtime at 32 and at 64 lanes, on
    HIP-on-CUDA and hipcc where present), each --run compared, and each port kernel matching an original
    kernel (name and signature) replayed on the original's captured launches at every width (exit 0:
    everything compared matches; 1: something differs or failed; 2: bad usage)."""
    _exclusive(exclusive)
    from porter.report import plain_console

    if not against:
        raise UsageError("give the original program with --against")
    chains = [c.strip() for c in toolchains.split(",") if c.strip()] if toolchains is not None else None
    _port_program(
        paths, to, include, out, False, json_out, {}, plain_console(stderr=True), fresh, run or [], timeout,
        rtol, atol, chains, "", (capture_launches, capture_mib, capture_first_mib), max_output, data, define or [],
        undefine or [], expect_exit, verify_against=against,
    )  # fmt: skip


@app.command()
def capture(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="The program: a folder, its files or a compile_commands.json.", show_default=False
        ),
    ],
    run: Annotated[
        list[str],
        typer.Option("--run", help='A command line for the program ("./prog ARGS"); repeatable.'),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Capture folder (default: <root>.capture/ beside the program)."),
    ] = None,
    include: IncludeOption = None,
    launches: Annotated[
        int, typer.Option("--launches", help="Launches kept per kernel, spread over the run.")
    ] = 3,
    mib: Annotated[
        int,
        typer.Option(
            "--mib", help="At most this many MiB of arrays per launch, once one of its kernel is kept."
        ),
    ] = 64,
    first_mib: Annotated[
        int,
        typer.Option(
            "--first-mib", help="At most this many MiB of arrays for a kernel's launch while none is kept."
        ),
    ] = 1024,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds per run (default 300).")] = None,
    toolchain: Annotated[
        str | None,
        typer.Option(
            "--toolchain",
            help="The capturing build: nvcc (an NVIDIA GPU) or cpu-runtime (default: a GPU's where one is here).",
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    max_output: MaxOutputOption = 64,
    data: DataOption = None,
    define: DefineOption = None,
    undefine: UndefineOption = None,
) -> None:
    """Run a program and record every kernel launch: grid, block, arguments, each pointer's allocation
    before and after (docs/CAPTURE_FORMAT.md), on a GPU here (an instrumented nvcc build) or on
    porter's CPU runtime."""
    from porter.defines import BuildFlags
    from porter.report import capture_view, plain_console
    from porter.workflows.capture import capture_program
    from porter.workflows.program_run import ProgramRuns

    err = plain_console(stderr=True)
    report = capture_program(
        [str(p) for p in paths],
        ProgramRuns(
            runs=tuple(run),
            timeout=timeout or 0.0,  # 0: capture's default
            capture_limits=(launches, mib, first_mib),
            max_output=max_output << 20,
            data=tuple(str(d) for d in data or ()),
        ),
        flags=BuildFlags(tuple(str(p) for p in include or ()), tuple(define or ()), tuple(undefine or ())),
        out_dir=str(out) if out is not None else None,
        toolchain=toolchain,
        progress=(lambda msg: err.print(f"porter: {msg}", style="dim")) if sys.stderr.isatty() else None,
    )
    show(report, capture_view, json_out)


@app.command()
def lift(
    target: Annotated[
        str, typer.Argument(help="A Python file, or one function of it: FILE.py or FILE.py::FUNCTION.")
    ],
    to: Annotated[
        str, typer.Option("--to", help="Targets, comma-separated: cuda, hip, opencl.")
    ] = "cuda,hip,opencl",
    sizes: Annotated[
        list[str] | None,
        typer.Option(
            "--sizes", help="Sizes the reference runs at, by the names the function binds: n=1000,m=64."
        ),
    ] = None,
    example: Annotated[
        str | None,
        typer.Option(
            "--example", help="FILE.py::FUNCTION returning the function's arguments as a dict by name."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: <file>.lifted/ beside the file).")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds per child job, and per import or call of your Python (a hang is stopped there).",
        ),
    ] = 120.0,
    fresh: FreshOption = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="anthropic:<name> or openai:<name>: a kernel for what the rules refuse."
        ),
    ] = None,
    base_url: BaseUrlOption = None,
    replay: ReplayOption = None,
    record: RecordOption = None,
    candidates: Annotated[int, typer.Option("--candidates", min=1, help="Independent conversations.")] = 1,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Rounds of each conversation.")] = 3,
    request_timeout: RequestTimeoutOption = DEFAULT_REQUEST_TIMEOUT,
    retries: RetriesOption = DEFAULT_RETRIES,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    exclusive: ExclusiveOption = False,
) -> None:
    """Turn Python loop nests into GPU kernels (CUDA, HIP, OpenCL), validate each against the Python
    function on every device here, and write a drop-in module with the same function names."""
    _exclusive(exclusive)
    from porter.harness.trial import ValidateOptions
    from porter.report import lift_view, plain_console
    from porter.workflows.lift import lift_file, parse_sizes
    from porter.workflows.options import ModelOptions, OutputOptions, RunOptions

    err = plain_console(stderr=True)
    report = lift_file(
        target,
        to=[t.strip() for t in to.split(",") if t.strip()],
        sizes=parse_sizes(sizes or []),
        example=example,
        run=RunOptions(validate=ValidateOptions(timeout_s=timeout)),
        output=OutputOptions(
            out_dir=str(out) if out is not None else None, fresh=fresh, markdown=lift_view.markdown
        ),
        model=None
        if model is None
        else ModelOptions(
            model,
            base_url=base_url,
            replay=str(replay) if replay else None,
            record=str(record) if record else None,
            candidates=candidates,
            rounds=rounds,
            request_timeout=request_timeout,
            retries=retries,
        ),
        progress=(lambda msg: err.print(f"porter: {msg}", style="dim")) if sys.stderr.isatty() else None,
    )
    show(report, lift_view, json_out)


@app.command()
def generate(
    description: Annotated[str, typer.Argument(help="What the kernel computes, in your words.")],
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="The specification of correctness: a Python function, FILE.py::FUNCTION, or a CUDA "
            "kernel, FILE.cu::KERNEL.",
        ),
    ] = None,
    requirements: Annotated[
        str,
        typer.Option(
            "--requirements", help="Speed, memory or precision requirements (fp16/bf16 allows them)."
        ),
    ] = "",
    to: Annotated[
        str, typer.Option("--to", help="Targets, comma-separated: cuda, hip, opencl.")
    ] = "cuda,hip,opencl",
    model: Annotated[str | None, typer.Option("--model", help="anthropic:<name> or openai:<name>.")] = None,
    candidates: Annotated[int, typer.Option("--candidates", min=1, help="Concurrent conversations.")] = 2,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Rounds of each conversation.")] = 3,
    sizes: Annotated[
        list[str] | None, typer.Option("--sizes", help="Sizes the reference runs at: n=1000,m=64.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <file>.generated/ beside the reference)."),
    ] = None,
    base_url: BaseUrlOption = None,
    replay: ReplayOption = None,
    record: RecordOption = None,
    request_timeout: RequestTimeoutOption = DEFAULT_REQUEST_TIMEOUT,
    retries: RetriesOption = DEFAULT_RETRIES,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Seconds per child job, and per call of the Python reference."),
    ] = 120.0,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    exclusive: ExclusiveOption = False,
) -> None:
    """Kernels from a description, each validated against a Python reference on every device here, timed
    beside the performance model's floor, with the fastest / least-memory / most-precise trade-offs.
    With a CUDA kernel as the reference, the model's kernels are judged against it as `optimize` does
    (without --model: porter's autotuner over its launch geometry)."""
    _exclusive(exclusive)
    from porter.harness.trial import ValidateOptions
    from porter.report import generate_view, plain_console
    from porter.workflows.generate import cuda_reference
    from porter.workflows.generate import generate as run_generate
    from porter.workflows.lift import parse_sizes
    from porter.workflows.options import ModelOptions, OutputOptions, RunOptions

    err = plain_console(stderr=True)
    kernel_ref = cuda_reference(reference)
    if kernel_ref is not None:
        if not description.strip():
            raise UsageError("generate needs a description of the operation")
        from porter.workflows.options import ModelOptions, OutputOptions

        folder = str(out) if out is not None else None
        if model is None:
            from porter.report import tune_view
            from porter.workflows.tune import tune_file

            tuned = tune_file(
                kernel_ref[0], kernel=kernel_ref[1], output=OutputOptions(folder, markdown=tune_view.markdown)
            )
            show(tuned, tune_view, json_out)
        from porter.report import optimize_view
        from porter.workflows.optimize import optimize_file

        asked = ModelOptions(
            model, base_url=base_url, replay=str(replay) if replay is not None else None,
            record=str(record) if record is not None else None, candidates=candidates, rounds=rounds,
            request_timeout=request_timeout, retries=retries,
        )  # fmt: skip
        optimized = optimize_file(
            kernel_ref[0], model=asked, kernel=kernel_ref[1],
            output=OutputOptions(folder, markdown=optimize_view.markdown),
            progress=optimize_view.progress_printer(), description=description, requirements=requirements,
        )  # fmt: skip
        show(optimized, optimize_view, json_out)
    report = run_generate(
        description,
        reference=reference,
        requirements=requirements,
        to=[t.strip() for t in to.split(",") if t.strip()],
        sizes=parse_sizes(sizes or []),
        model=None
        if model is None
        else ModelOptions(
            model,
            base_url=base_url,
            replay=str(replay) if replay else None,
            record=str(record) if record else None,
            candidates=candidates,
            rounds=rounds,
            request_timeout=request_timeout,
            retries=retries,
        ),
        run=RunOptions(validate=ValidateOptions(timeout_s=timeout)),
        output=OutputOptions(
            out_dir=str(out) if out is not None else None,
            markdown=generate_view.markdown,
            chart=generate_view.chart,
        ),
        progress=(lambda msg: err.print(f"porter: {msg}", style="dim")) if sys.stderr.isatty() else None,
    )
    show(report, generate_view, json_out)


@app.command()
def optimize(
    file: Annotated[Path, typer.Argument(help="A CUDA source file (.cu).")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="anthropic:<model> or openai:<model> (keys from the environment); without it, porter's "
            "autotuner searches launch geometries instead.",
        ),
    ] = None,
    kernel: Annotated[
        str | None, typer.Option("--kernel", help="The kernel (when FILE has several).")
    ] = None,
    capture: Annotated[
        Path | None,
        typer.Option(
            "--capture", help="Tune on the launches of a capture of the program's run (porter capture)."
        ),
    ] = None,
    size: Annotated[
        list[str] | None,
        typer.Option(
            "--size", help="Autotuner: time at this size symbol's value, e.g. --size n=1<<26; repeatable."
        ),
    ] = None,
    candidates: Annotated[int, typer.Option("--candidates", help="Concurrent candidates per round.")] = 2,
    rounds: Annotated[int, typer.Option("--rounds", help="Rounds of generate, validate, repair.")] = 3,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: <stem>.optimized beside FILE).")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    base_url: BaseUrlOption = None,
    replay: ReplayOption = None,
    record: RecordOption = None,
    max_tokens_total: Annotated[
        int | None, typer.Option("--max-tokens-total", help="Stop after this many tokens in all.")
    ] = None,
    max_dollars: Annotated[
        float | None, typer.Option("--max-dollars", help="Stop after spending this many US dollars.")
    ] = None,
    max_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-seconds",
            help="Stop after this many seconds: no round, request or retry starts after it, and a request "
            "still waiting for its answer then is cut off.",
        ),
    ] = None,
    include: Annotated[list[Path] | None, typer.Option("-I", help="Include directory; repeatable.")] = None,
    request_timeout: RequestTimeoutOption = DEFAULT_REQUEST_TIMEOUT,
    retries: RetriesOption = DEFAULT_RETRIES,
    fresh: FreshOption = False,
    tune: Annotated[
        bool,
        typer.Option(
            "--tune",
            help="With --model: then search launch geometries and compile options over the "
            "original and the model's fastest rewrite together (the autotuner's search).",
        ),
    ] = False,
    define: DefineOption = None,
    exclusive: ExclusiveOption = False,
) -> None:
    """Ask a model for faster versions of a CUDA kernel; validate and time every candidate against the
    original, and keep the best validated rewrite and the trade-offs (fastest, least memory, most precise)."""
    _exclusive(exclusive)
    from porter.defines import BuildFlags
    from porter.report import optimize_view
    from porter.workflows.options import ModelOptions, OutputOptions, RunOptions

    flags = BuildFlags(tuple(str(p) for p in include or ()), tuple(define or ()))
    folder = str(out) if out is not None else None
    if model is None:  # the autotuner: no model, no key
        from porter.report import tune_view
        from porter.workflows.bench import parse_sizes
        from porter.workflows.tune import tune_file

        tuned = tune_file(
            str(file),
            kernel=kernel,
            capture_dir=str(capture) if capture is not None else None,
            run=RunOptions(flags=flags, sizes=parse_sizes(size or [])),
            output=OutputOptions(folder, markdown=tune_view.markdown),
        )
        show(tuned, tune_view, json_out)
    from porter.workflows.optimize import optimize_file

    if capture is not None or size:
        raise UsageError("--capture and --size are for the autotuner (without --model)")
    from porter.report.tune_view import markdown as tune_markdown

    asked = ModelOptions(
        model,
        base_url=base_url,
        replay=str(replay) if replay is not None else None,
        record=str(record) if record is not None else None,
        candidates=candidates,
        rounds=rounds,
        request_timeout=request_timeout,
        retries=retries,
        max_dollars=max_dollars,
        max_tokens_total=max_tokens_total,
        max_seconds=max_seconds,
    )
    report = optimize_file(
        str(file),
        model=asked,
        kernel=kernel,
        run=RunOptions(flags=flags),
        output=OutputOptions(folder, fresh, markdown=optimize_view.markdown, chart=optimize_view.chart),
        progress=optimize_view.progress_printer(),
        tune=OutputOptions(markdown=tune_markdown) if tune else None,
    )
    show(report, optimize_view, json_out)


# SIGTERM (`timeout`, CI cancellation, `docker stop`) is handled like Ctrl-C: KeyboardInterrupt in the main
# thread, so every workflow keeps what it verified (its reports are on disk) and exits cleanly.
_terminated = False
INTERRUPT_GRACE_S = 2.0  # how long an interrupted run waits for threads still blocked in a request


def _on_sigterm(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt once; a second SIGTERM during that shutdown is ignored."""
    global _terminated
    if _terminated:
        return
    _terminated = True
    raise KeyboardInterrupt("terminated (SIGTERM)")


def install_signal_handlers() -> None:
    """SIGTERM -> KeyboardInterrupt in the main thread (signals can only be handled there)."""
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGTERM, _on_sigterm)


def _interrupted() -> NoReturn:
    """Exit after Ctrl-C (130) or SIGTERM (143) without waiting for threads still blocked in a model
    request past a short grace (its timeout can be minutes): what was verified is already on disk."""
    code = 128 + signal.SIGTERM if _terminated else 130
    try:
        typer.echo("porter: terminated (SIGTERM)" if _terminated else "porter: interrupted", err=True)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
        for t in others:
            t.join(max(0.0, deadline - time.monotonic()))
        if not any(t.is_alive() for t in others):
            sys.exit(code)
    except KeyboardInterrupt:
        pass
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    tempdirs.finish()  # os._exit runs no atexit handler
    os._exit(code)


def show_input_warnings() -> None:
    """Files porter skipped (:class:`porter.files.InputWarning`: a header too large or not a regular
    file) as one ``porter: warning: ...`` line each on stderr, once per message."""
    import warnings

    from porter.files import InputWarning

    warnings.filterwarnings("default", category=InputWarning)
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if isinstance(category, type) and issubclass(category, InputWarning):
            typer.echo(f"porter: warning: {message}", err=True)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show


# A path the system refused (an --out name too long, a folder that cannot be made): bad input, exit 2.
_PATH_ERRNOS = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM}
    | {errno.EROFS, errno.EEXIST, errno.ELOOP, errno.EINVAL}
)


def _os_error_line(err: OSError) -> str:
    name = err.filename if err.filename is not None else err.filename2
    why = err.strerror or str(err)
    return f"{name}: {why}" if name is not None else why


def main() -> None:
    """Console entry point: never a traceback, always a one-line error and an exit code."""
    for stream in (sys.stdout, sys.stderr):  # a byte of a user's file that is not UTF-8 goes out as it came
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    install_signal_handlers()
    show_input_warnings()
    one_blas_thread()  # before NumPy is imported: porter's own NumPy does no linear algebra
    tempdirs.start()  # leftovers of killed porters removed; this run's temporary files in one folder
    try:
        code = app(standalone_mode=False)  # click returns typer.Exit's code instead of raising it
        if code == 130:  # typer's code for a KeyboardInterrupt (Ctrl-C, or SIGTERM through the handler)
            _interrupted()
        if isinstance(code, int) and code:
            sys.exit(code)
    except PorterError as err:
        typer.echo(f"porter: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except OSError as err:  # a file or folder the system refused, named in one line (never a traceback)
        typer.echo(f"porter: {_os_error_line(err)}", err=True)
        sys.exit(2 if err.errno in _PATH_ERRNOS else 1)
    except Exception as err:  # noqa: BLE001 - the last line of defence against tracebacks
        if isinstance(err, ValueError) and str(err).startswith("embedded null"):  # os.* refuse such names
            typer.echo(f"porter: a path contains a NUL byte ({err})", err=True)
            sys.exit(2)
        show = getattr(err, "show", None)
        if callable(show) and hasattr(err, "exit_code"):  # click's (or typer's bundled click's) errors
            show()
            sys.exit(
                2 if "Usage" in type(err).__name__ or "Parameter" in type(err).__name__ else err.exit_code
            )
        if type(err).__name__ == "Abort":
            sys.exit(1)
        typer.echo(f"porter: internal error: {type(err).__name__}: {err}", err=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
