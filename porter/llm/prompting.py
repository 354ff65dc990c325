"""Prompts assembled from the parts in ``porter/llm/prompts/*.md`` and the target dialect's own rules
(``prompt.md`` of its backend folder, through :meth:`porter.backends.dialect.Dialect.prompt_rules`),
ordered stable to volatile.

The system prompt is four parts that stay the same for every request about one kernel (so vendors
can cache them): the role and the target dialect's rules, the hardware from the performance model,
the validation rules the candidate will face, and the kernel's structure from the scan.  The first
user message is the task with the original source; each later user message is the evidence of the
previous round (compiler log, validation mismatch, timing, or a missing code block).

The user's source, compiler logs and mismatch details go in as *quoted data*: inside a fenced block
whose fence is longer than any backtick run in the text, under an instruction that it is data.
Templates use ``$name`` placeholders (:class:`string.Template`), so the braces of C code never need
escaping and inserted text is never re-expanded.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from string import Template

from porter.llm.base import PromptPart
from porter.model import Hazard, Kernel, KernelSpec

TASKS = ("optimize", "translate", "lift", "generate")
UNKNOWN = "unknown"
LOG_LIMIT = 6000  # characters of a compiler log / mismatch detail sent back (head and tail kept)


@dataclass(frozen=True)
class Dialect:
    key: str  # "cuda" | "hip" | "opencl"
    name: str  # "CUDA C++"
    fence_label: str  # the label asked for on the reply's code block
    headers: tuple[str, ...]  # headers a reply may include
    rules: str = ""  # what the model is told of the dialect: a template of $headers (its prompt.md)


@dataclass(frozen=True)
class PromptContext:
    """Everything the prompts say about one kernel; plain data filled in by the workflow."""

    kernel: Kernel  # the original kernel, from the scan
    path: str  # the user's file
    source: str  # the original program text (quoted into the task message)
    dialect: str = "cuda"  # the dialect the reply must be written in
    task: str = "optimize"  # "optimize" | "translate" | "lift" (a kernel for a Python function)
    hardware: Mapping[str, str] = field(default_factory=dict)  # hardware.md fields (missing: "unknown")
    spec: KernelSpec | None = None  # how the harness launches the kernel
    hazards: tuple[Hazard, ...] = ()
    trials: int = 3
    rtol: str = "1e-5"
    constraints: str = "none beyond the rules above"
    untranslatable: str = ""  # for task "translate": what the rule-based translator could not do
    original_includes: tuple[str, ...] = ()  # headers the original includes (allowed in replies)
    # For task "translate": the symbol the reply's kernel must define (default: the kernel's name)
    # and, for OpenCL, the parameters it must take in order, in OpenCL spelling (the original's
    # parameters mapped to OpenCL plus the arguments the rule-based translation adds).
    entry: str = ""
    signature: tuple[str, ...] = ()
    # For task "generate": the user's description of the operation and their requirements
    description: str = ""
    requirements: str = ""


# --------------------------------------------------------------------------- the parts


@cache
def _settings() -> dict[str, object]:
    text = resources.files("porter.llm").joinpath("loop.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def settings() -> dict[str, object]:
    """The loop's data file (``porter/llm/loop.toml``): the host-code rules."""
    return _settings()


def dialect(key: str) -> Dialect:
    """How prompts speak of dialect `key`: ``[prompt]`` of its folder's dialect.toml and the rules of
    its folder's prompt.md (the registry's)."""
    from porter.backends import dialect_names, get_dialect

    if key not in dialect_names():
        raise ValueError(f"unknown dialect {key!r} (choose from {', '.join(dialect_names())})")
    target = get_dialect(key)
    facts = target.facts
    row = facts.prompt if facts is not None else {}
    if not row:
        raise ValueError(f"dialect {key!r} has no [prompt] table in its dialect.toml")
    headers = tuple(str(h) for h in row["headers"])
    return Dialect(key, str(row["name"]), str(row["fence_label"]), headers, target.prompt_rules())


@cache
def part(name: str) -> str:
    """The raw text of ``prompts/<name>.md``."""
    return resources.files("porter.llm").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def part_names() -> list[str]:
    folder = resources.files("porter.llm").joinpath("prompts")
    return sorted(p.name.removesuffix(".md") for p in folder.iterdir() if p.name.endswith(".md"))


def render(name: str, **fields: object) -> str:
    """``prompts/<name>.md`` with its ``$placeholders`` filled (see :func:`fill`)."""
    return fill(part(name), **fields)


def fill(template: str, **fields: object) -> str:
    """`template` with its ``$placeholders`` filled; KeyError names a missing field.  Text from the
    user's files goes in printable (a Latin-1 byte as its character, never an escape)."""
    from porter.files import printable

    filled = {k: printable(str(v)) for k, v in fields.items()}
    return Template(template).substitute(filled).strip() + "\n"


def placeholders(name: str) -> set[str]:
    """The ``$placeholders`` a part uses."""
    return set(Template(part(name)).get_identifiers())


def quote(text: str, label: str = "") -> str:
    """`text` as a fenced block that nothing inside it can close (a fence longer than any run of
    backticks in the text)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{label}\n{body}{fence}"


def clip(text: str, limit: int = LOG_LIMIT) -> str:
    """Keep the head and the tail of a long log (first errors and last words)."""
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters omitted ...]\n{text[-tail:]}"


# --------------------------------------------------------------------------- system prompt


def _params(kernel: Kernel) -> str:
    out = []
    for i, p in enumerate(kernel.params, 1):
        facts = []
        if p.pointer:
            facts.append("read-only" if p.const or not p.written else "written")
        out.append(f"{i}. `{p.type} {p.name}`" + (f" ({', '.join(facts)})" if facts else ""))
    return "; ".join(out) or "none"


def _shared(kernel: Kernel) -> str:
    if not kernel.shared:
        return "none"
    items = []
    for s in kernel.shared:
        size = "dynamic (extern)" if s.extern or s.size is None else s.size
        items.append(f"`{s.type} {s.name}[{size}]` (line {s.line})")
    return "; ".join(items)


def _hazards(hazards: Sequence[Hazard], kernel: Kernel) -> str:
    inside = [h for h in hazards if kernel.line <= h.line <= kernel.end_line]
    if not inside:
        return "none"
    return "; ".join(f"line {h.line}: {h.code}: {h.message}" for h in inside)


def _launch(spec: KernelSpec | None) -> dict[str, str]:
    if spec is None:
        return {"grid": UNKNOWN, "block": UNKNOWN, "shared_bytes": "0"}
    return {
        "grid": "(" + ", ".join(spec.grid) + ")",
        "block": "(" + ", ".join(spec.block) + ")",
        "shared_bytes": spec.shared_bytes,
    }


HARDWARE_FIELDS = (
    "device_name",
    "device_kind",
    "arch",
    "bandwidth",
    "fp32_flops",
    "fp64_flops",
    "multiprocessors",
    "warp_size",
    "shared_per_sm",
    "registers_per_sm",
    "max_threads_per_sm",
    "cache_bytes",
    "bench_size",
    "bytes",
    "flops",
    "floor",
    "bound",
    "hardware_notes",
)


def system_parts(ctx: PromptContext) -> list[PromptPart]:
    """The stable system prompt: role + dialect, hardware, validation rules, kernel structure."""
    d = dialect(ctx.dialect)
    headers = ", ".join(f"`{h}`" for h in d.headers) if d.headers else "none (do not #include anything)"
    role = render("role", dialect_name=d.name, fence_label=d.fence_label, kernel_name=ctx.kernel.name)
    if not d.rules.strip():
        raise ValueError(f"dialect {d.key!r} has no prompt.md in its folder")
    rules = fill(d.rules, headers=headers)
    hardware_fields = {name: ctx.hardware.get(name, UNKNOWN) for name in HARDWARE_FIELDS}
    hardware_fields["hardware_notes"] = ctx.hardware.get("hardware_notes", "")
    hardware = render("hardware", **hardware_fields)
    validation = render("validation", trials=ctx.trials, rtol=ctx.rtol)
    k = ctx.kernel
    structure = render(
        "structure",
        kernel_name=k.name,
        line=k.line,
        path=ctx.path,
        params=_params(k),
        shared=_shared(k),
        barriers=k.barriers,
        atomics=", ".join(k.atomics) or "none",
        warp_intrinsics=", ".join(k.warp_intrinsics) or "none",
        launch_bounds=k.launch_bounds or "none",
        hazards=_hazards(ctx.hazards, k),
        **_launch(ctx.spec),
    )
    return [
        PromptPart(role + "\n" + rules),
        PromptPart(hardware),
        PromptPart(validation),
        PromptPart(structure),
    ]


# --------------------------------------------------------------------------- messages


def task_message(ctx: PromptContext, candidate: int = 1, candidates: int = 1) -> str:
    """The first user message: the task, the original source as quoted data, and which candidate
    this conversation is (so concurrent candidates are distinct requests and explore apart)."""
    if ctx.task not in TASKS:
        raise ValueError(f"unknown task {ctx.task!r}")
    d = dialect(ctx.dialect)
    fields: dict[str, object] = dict(
        kernel_name=ctx.kernel.name,
        constraints=ctx.constraints,
        source_block=quote(ctx.source, "python" if ctx.task in ("lift", "generate") else "cuda"),
    )
    if ctx.task == "lift":  # the function the rules refused, and why
        fields.update(untranslatable=ctx.untranslatable or "the loops are not a pattern they know")
    if ctx.task == "generate":  # what the user asked for, in their words (quoted data, like the source)
        fields.update(description=ctx.description, requirements=ctx.requirements or "none")
    if ctx.task == "translate":
        fields.update(dialect_name=d.name, untranslatable=ctx.untranslatable or "see the hazards above")
    text = render(f"task_{ctx.task}", **fields)
    if ctx.description and ctx.task != "generate":  # `generate` with a CUDA reference: the user's request
        text = (
            render("request", description=ctx.description, requirements=ctx.requirements or "none")
            + "\n"
            + text
        )
    if candidates > 1:
        text += (
            f"\nYou are candidate {candidate} of {candidates} working on this kernel independently; "
            "try an approach the others are unlikely to choose.\n"
        )
    return text


def compile_feedback(log: str) -> str:
    return render("repair_compile", log_block=quote(clip(log) or "(the compiler printed nothing)"))


def mismatch_feedback(reason: str, sizes: Sequence[Mapping[str, int]], log: str) -> str:
    passed = "; ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in sizes) or "none"
    detail = clip("\n".join(x for x in (reason, log) if x))
    return render("repair_mismatch", reason=reason, sizes=passed, log_block=quote(detail))


def _ms(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else UNKNOWN


def timing_feedback(
    *,
    device: str,
    time_ms: float | None,
    original_ms: float | None,
    floor_ms: float | None,
    checks: Sequence[str] = (),
) -> str:
    if time_ms is not None and original_ms is not None and time_ms > 0:
        speedup = f"{original_ms / time_ms:.2f}x the original's speed"
    else:
        speedup = "speedup unknown"
    floor = f"{floor_ms:.4g} ms" if floor_ms is not None else "not known for this device"
    pct = (
        f"{100 * floor_ms / time_ms:.0f}% of the floor's speed"
        if floor_ms is not None and time_ms
        else "no % of peak on this device"
    )
    return render(
        "repair_timing",
        checks=", ".join(checks) or "all",
        device=device or UNKNOWN,
        time_ms=_ms(time_ms),
        original_ms=_ms(original_ms),
        speedup=speedup,
        floor=floor,
        pct_of_floor=pct,
    )


def nocode_feedback(reason: str, ctx: PromptContext) -> str:
    d = dialect(ctx.dialect)
    return render("repair_nocode", reason=reason, kernel_name=ctx.kernel.name, fence_label=d.fence_label)


def rejected_feedback(reason: str, ctx: PromptContext) -> str:
    return render("repair_rejected", reason=reason, kernel_name=ctx.kernel.name)
