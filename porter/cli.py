"""Porter's command line: arguments in, a workflow call, rendering out. No logic of its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from porter import __version__
from porter.errors import PorterError

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
) -> None:
    """Porter scans CUDA and Python code, translates kernels to HIP and OpenCL, asks an LLM for what rules
    cannot do, and compiles, runs and validates every variant on the hardware present."""


def emit_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")


@app.command()
def scan(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (searched recursively).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")] = False,
) -> None:
    """Map kernels, launch sites, allocations, Python loop nests and portability hazards."""
    from porter.report import scan_view
    from porter.scan import scan_paths

    result = scan_paths([str(p) for p in paths])
    if json_out:
        emit_json(scan_view.to_json(result))
    else:
        scan_view.render(result)
    raise typer.Exit(scan_view.exit_code(result))


def main() -> None:
    """Console entry point: never a traceback, always a one-line error and an exit code."""
    try:
        app(standalone_mode=False)
    except PorterError as err:
        typer.echo(f"porter: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except KeyboardInterrupt:
        typer.echo("porter: interrupted", err=True)
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 - the last line of defence against tracebacks
        show = getattr(err, "show", None)
        if callable(show) and hasattr(err, "exit_code"):  # click's (or typer's bundled click's) errors
            show()
            sys.exit(2 if "Usage" in type(err).__name__ or "Parameter" in type(err).__name__ else err.exit_code)
        if type(err).__name__ == "Abort":
            sys.exit(1)
        typer.echo(f"porter: internal error: {type(err).__name__}: {err}", err=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
