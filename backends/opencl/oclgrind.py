"""Oclgrind as a checking device: run a child process under it, then read its log.

Oclgrind simulates an OpenCL 1.2 device and reports out-of-bounds accesses, reads of
uninitialised memory and data races.  A process started with :func:`oclgrind_wrapper` as
its command prefix sees only the Oclgrind platform, so the ordinary OpenCL backend inside
it builds and runs on the simulator.  Kernel findings go to the ``--log`` file, API errors
to the process's stderr; Oclgrind exits 0 either way, so the verdict is
``parse_oclgrind_log(log_file_text + child_stderr)``.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from porter.backends import Device, HardwareFacts, load_data

FINDING_KINDS: tuple[str, ...] = ("out-of-bounds", "uninitialized", "data-race", "invalid-api", "other")

_KERNEL = re.compile(r"^\s*Kernel:\s*(\S+)")
_AT_LINE = re.compile(r"^\s*At line (\d+)")
_API_FIELD = re.compile(r"^\s*(Function|Error|For argument):?\s*(.*?)\s*$")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# a data race's two sides: "First entity:  Global(12,0,0) Local(12,0,0) Group(0,0,0)"
_ENTITY = re.compile(r"^\s*(?:First|Second) entity:\s*(.*?)\s*$")


@dataclass(frozen=True)
class Finding:
    kind: str  # one of FINDING_KINDS
    message: str  # the headline, e.g. "Invalid write of size 4 at global memory address 0x..."
    kernel: str | None = None
    line: int | None = None  # source line of the kernel program, when reported
    code: str | None = None  # that source line's text, when reported
    count: int = 1  # identical findings (other work-items, other addresses) folded into this one
    # a data race's second access (Oclgrind reports both sides), and who made each ("Global(12,0,0)
    # Local(12,0,0) Group(0,0,0)", first side first)
    other_line: int | None = None
    other_code: str | None = None
    entities: tuple[str, ...] = ()


@functools.cache
def settings() -> dict[str, Any]:
    """The checker's data: options, facts, message kinds, ignored API probes (oclgrind.toml)."""
    return load_data("porter.backends.opencl", "oclgrind.toml")


def oclgrind_path() -> str | None:
    """The `oclgrind` program, when it and its runtime library are installed."""
    program = shutil.which(settings()["program"])
    if program is None:
        return None
    prefix = Path(program).resolve().parent.parent
    if not any((prefix / lib).is_file() for lib in settings()["libraries"]):
        return None
    return program


@functools.cache
def oclgrind_version() -> str:
    """ "Oclgrind 21.10" (from `oclgrind --version`), or "" when it cannot be run."""
    program = oclgrind_path()
    if program is None:
        return ""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    match = re.search(r"Oclgrind \S+", out.stdout + out.stderr)
    return match.group(0) if match else ""


def oclgrind_wrapper(
    log_path: str, *, max_errors: int | None = None, without: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Command prefix that runs a child under Oclgrind with every check on (but the options in
    `without`), findings to `log_path`."""
    data = settings()
    limit = data["max_errors"] if max_errors is None else max_errors
    program = oclgrind_path() or data["program"]
    options = [o for o in data["options"] if o not in without]
    return (program, *options, "--max-errors", str(limit), "--log", log_path)


def plugin_option(message: str) -> str:
    """The option of the plugin an "OCLGRIND FATAL ERROR (./src/plugins/X.cpp:N)" names ("" when it
    names none porter knows: then nothing can be left out)."""
    for source, option in settings().get("plugin_options", {}).items():
        if f"/{source}:" in message or f"({source}:" in message:
            return str(option)
    return ""


def checker_device(opencl_version: str | None = None, driver: str | None = None) -> Device:
    """The Device that stands for Oclgrind (the same inside and outside a wrapped child)."""
    data = settings()
    facts = data["facts"]
    return Device(
        backend="opencl",
        name=data["device_name"],
        arch=f"opencl-{opencl_version or facts['opencl_version']}/checker",
        kind="checker",
        platform=data["platform"],
        compiler="oclgrind",
        driver=driver if driver is not None else oclgrind_version(),
        facts=HardwareFacts(
            warp_size=facts["warp_size"],
            max_threads_per_block=facts["max_threads_per_block"],
            shared_mem_per_block=facts["shared_mem_per_block"],
            multiprocessors=facts["multiprocessors"],
            subgroups=False,
        ),
        contracts=True,
    )


def _blocks(text: str) -> list[list[str]]:
    """Messages: a headline at column 0 and the tab-indented lines under it."""
    blocks: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        if line[0] in " \t":
            if blocks:
                blocks[-1].append(line)
        else:
            blocks.append([line])
    return blocks


def _classify(headline: str, body: list[str]) -> str | None:
    for rule in settings()["kinds"]:
        if re.search(rule["pattern"], headline):
            return str(rule["kind"])
    if headline.startswith("Oclgrind") or any(_KERNEL.match(line) for line in body):
        return "other"
    return None


def _api_fields(body: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in body:
        match = _API_FIELD.match(line)
        if match:
            fields[match.group(1)] = match.group(2).strip("'\"")
    return fields


def _ignored(fields: dict[str, str]) -> bool:
    return any(
        fields.get("Function") == rule["function"]
        and fields.get("Error") == rule["error"]
        and fields.get("For argument") == rule["argument"]
        for rule in settings()["ignore"]
    )


def _finding(kind: str, headline: str, body: list[str]) -> Finding | None:
    kernel = next((m.group(1) for m in map(_KERNEL.match, body) if m), None)
    places: list[tuple[int, str | None]] = []  # each "At line N" with the source line under it
    for i, text in enumerate(body):
        match = _AT_LINE.match(text)
        if match:
            code = None
            if i + 1 < len(body) and not _AT_LINE.match(body[i + 1]):
                code = body[i + 1].strip() or None
                code = None if code == "(source not available)" else code
            places.append((int(match.group(1)), code))
    line_no, code = places[0] if places else (None, None)
    other_line, other_code = places[1] if kind == "data-race" and len(places) > 1 else (None, None)
    entities = tuple(m.group(1) for m in map(_ENTITY.match, body) if m) if kind == "data-race" else ()
    message = headline.strip()
    if kind == "invalid-api":
        fields = _api_fields(body)
        if _ignored(fields):
            return None
        parts = [fields.get("Function", "?"), fields.get("Error", "")]
        if fields.get("For argument"):
            parts.append(f"(argument {fields['For argument']})")
        message = f"{message}: " + " ".join(p for p in parts if p)
    return Finding(kind, message, kernel, line_no, code, 1, other_line, other_code, entities)


def parse_oclgrind_log(text: str) -> list[Finding]:
    """Findings in an Oclgrind log (and/or the stderr of a process run under it), in order.

    Repeats of one finding (other work-items, other addresses) are folded into one with a
    count.  Lines that are not Oclgrind messages (a Python traceback, program output) are
    skipped, and so are API errors that are host-library feature probes (see oclgrind.toml).
    """
    folded: dict[tuple[str, str, str | None, int | None], Finding] = {}
    for headline, *body in _blocks(text):
        kind = _classify(headline, body)
        if kind is None:
            continue
        finding = _finding(kind, headline, body)
        if finding is None:
            continue
        key = (finding.kind, _ADDRESS.sub("0x?", finding.message), finding.kernel, finding.line)
        seen = folded.get(key)
        if seen is None:
            folded[key] = finding
        else:
            folded[key] = replace(seen, count=seen.count + finding.count)
    return list(folded.values())
