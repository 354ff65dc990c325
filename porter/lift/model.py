"""What the rules refuse, asked of a model: one kernel for a Python function, judged against the Python.

For a function the analysis refused for a reason a kernel can still address (a recurrence, a pattern the
rules do not know) -- not one with side effects or Python objects, which no kernel can reproduce -- porter
fixes a contract the model must meet: one ``extern "C"`` kernel ``<function>_model`` whose parameters are
the function's own in order (each array as a pointer to its elements, row-major, followed by its extents
``d_<name>_0 ...``; each scalar as its C type), plus ``result`` when the function returns a number; launched
once with ``max(1, min(65535, ceil(N / 256)))`` blocks of 256 threads, N the largest array's element count.
The model's reply goes through porter's LLM loop (:func:`porter.llm.loop.run_loop`): screened (device
code only, the contract's name and parameters), built as device code for a real GPU compiler first, then
judged by :func:`porter.lift.validate.judge` on every device against the Python at every size, the
held-back ones included; a mismatch, a compiler log or a timing goes back to the model.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from porter.lift.ir import Arg, Kernel, Launch, Lifted, Local, Param
from porter.lift.types import C_TYPES

BLOCK = 256
C_WORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "int", "long", "register", "return", "short", "signed", "sizeof", "static",
    "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "class", "new",
    "delete", "this", "template", "typename", "namespace", "operator", "private", "public", "protected",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "result",
}  # fmt: skip


@dataclass(frozen=True)
class Contract:
    """The kernel a model must write for `function`: its name, parameters (C declarations, in order),
    the launch's arguments, and the result buffer when the function returns a number."""

    function: str
    entry: str
    params: tuple[Param, ...]
    sizes: tuple[tuple[str, str], ...]
    decls: tuple[str, ...]
    args: tuple[Arg, ...]
    grid: str
    returns: str  # "" or the dtype of the returned number
    source: str  # the function's text
    imports: tuple[str, ...] = ()

    def stub(self) -> str:
        """The kernel's declaration, for the prompt and for the screen's signature check."""
        return f'extern "C" __global__ void {self.entry}({", ".join(self.decls)})\n{{\n}}\n'


def eligible(reason: str) -> bool:
    """Whether a refusal is one a kernel can address (not side effects, not Python objects)."""
    blocked = (
        "calls ",
        "Python object",
        "touches",
        "a list",
        "a dict",
        "a tuple",
        "several values",
        "*args",
        "method",
    )
    return not any(b in reason for b in blocked)


def contract(
    function: str,
    params: Sequence[Param],
    sizes: Sequence[tuple[str, str]],
    returns: str,
    source: str,
    imports: Sequence[str] = (),
) -> Contract | str:
    """The contract for a refused function, or why there cannot be one."""
    decls: list[str] = []
    args: list[Arg] = []
    arrays = [p for p in params if p.kind == "array"]
    if not arrays:
        return "the function takes no array"
    for p in params:
        if keyword.iskeyword(p.name) or p.name in C_WORDS:
            return f"the parameter {p.name} is a C++ word"
        if p.kind == "array":
            decls.append(f"{C_TYPES[p.dtype]}* {p.name}")
            args.append(Arg("array", p.name))
            for k in range(p.ndim):
                decls.append(f"long long d_{p.name}_{k}")
                args.append(Arg("scalar", f"{p.name}.shape[{k}]", "int64"))
        else:
            decls.append(f"{C_TYPES[p.dtype]} {p.name}")
            args.append(Arg("scalar", p.name, p.dtype))
    if returns:
        decls.append(f"{C_TYPES[returns]}* result")
        args.append(Arg("array", "__result"))
    largest = "max(" + ", ".join(f"{a.name}.size" for a in arrays) + (", 1)" if len(arrays) == 1 else ")")
    grid = f"max(1, min(65535, ({largest} + {BLOCK - 1}) // {BLOCK}))"
    return Contract(function, f"{function}_model", tuple(params), tuple(sizes), tuple(decls), tuple(args),
                    grid, returns, source, tuple(imports))  # fmt: skip


def lifted(c: Contract, code: str, model: str, precision: str = "") -> Lifted:
    """The model's kernel as a lifted function (one kernel, one launch), ready to judge (`precision`:
    the reduced precision its results are judged at, where the user allowed it)."""
    kernel = Kernel(c.entry, f"llm:{model}", code, tuple((a.value, a.kind) for a in c.args), 0)
    launch = Launch(c.entry, (c.grid,), (BLOCK,), c.args)
    temps = (Local("__result", c.returns, ("1",), "zeros", 0),) if c.returns else ()
    return Lifted(
        function=c.function, line=0, patterns=(f"llm:{model}",), params=c.params, sizes=c.sizes, locals=(),
        kernels=(kernel,), steps=(launch,), returns="scalar:__result" if c.returns else "",
        temporaries=temps, writes=tuple(p.name for p in c.params if p.kind == "array"), source=c.source,
        imports=c.imports, reorders=("__result",) if c.returns else (), precision=precision,
    )  # fmt: skip


def prompt_kernel(c: Contract) -> Any:
    """The contract's kernel as porter's scan reads it: what the screen holds a reply to."""
    from porter.scan import scan_source

    scan = scan_source(c.stub().encode(), f"{c.function}.cu", "cuda")
    return next(k for k in scan.kernels if k.name == c.entry)


def constraints(c: Contract, params: Mapping[str, Any], reduced: bool = False) -> str:
    """The task's constraints paragraph: how the kernel is called (`reduced`: the user allows half or
    bfloat16 arithmetic)."""
    lines = [
        f"Write one CUDA kernel with exactly this signature: `{c.stub().splitlines()[0]}`.",
        f"Porter launches it once with gridDim.x = {c.grid.replace('//', '/')} blocks of {BLOCK} threads "
        "(N: the largest array's element count); cover the work with grid-stride loops, or have some "
        "threads idle -- the launch is fixed.",
        "Arrays are passed as pointers to their elements in row-major order, each followed by its extents "
        "(d_<name>_0 is the first dimension).  Arrays the Python function writes must hold what it leaves "
        "in them; the others must be left unchanged.",
    ]
    if c.returns:
        lines.append(f"The function returns a number: write it to result[0] (a {C_TYPES[c.returns]}).")
    if reduced:
        lines.append(
            "The arrays keep their types, but the user allows half (cuda_fp16.h) or bfloat16 (cuda_bf16.h) "
            "arithmetic inside the kernel; its error is measured and shown beside the others'."
        )
    else:
        lines.append(
            "Compute in the precision NumPy uses for the same expressions (float32 arrays stay float32)."
        )
    return " ".join(lines)


@dataclass
class Judged:
    """A model's kernel judged: the lifted function it makes, its sources per target, its verdicts."""

    lifted: Lifted
    sources: dict[str, Any]
    verdicts: tuple[Any, ...]


def judge(
    c: Contract,
    code: str,
    model: str,
    refs: Sequence[tuple[str, Mapping[str, Any], Any]],
    targets: Sequence[str],
    devices: Mapping[str, Sequence[Any]],
    timeout: float,
    precision: str = "",
) -> tuple[Any, Judged | None]:
    """The evaluation of one screened reply (porter.records.Evaluation): built as device code for a
    real GPU compiler first, then judged against the Python on every device of every target; the Judged
    candidate when it validated everywhere."""
    from porter.backends import CompileOptions
    from porter.harness.gate import device_build_check
    from porter.lift import validate
    from porter.model import Variant
    from porter.records import Evaluation, unvalidated

    variant = Variant(c.function, "cuda", code, c.entry, f"llm:{model}")
    gate = device_build_check(variant, CompileOptions(untrusted=True))
    if not gate.ok:
        return Evaluation(False, "compile", gate.reason, gate.log), None
    candidate = lifted(c, code, model, precision)
    srcs = validate.sources(candidate, list(targets))
    verdicts = tuple(
        validate.judge(candidate, srcs[t], d, refs, timeout, untrusted=True)
        for t in targets
        for d in devices[t]
    )
    bad = unvalidated(verdicts)
    if bad is not None:
        return bad, None
    errs = [v.max_rel_err for v in verdicts if v.max_rel_err is not None]
    return (
        Evaluation(True, "done", f"validated on {len(verdicts)} device(s)", verdicts=verdicts,
                   max_rel_err=max(errs, default=None)),
        Judged(candidate, srcs, verdicts),
    )  # fmt: skip


def reduced_precision(code: str) -> str:
    """The reduced-precision type a kernel computes with ("" when none): "float16" or "bfloat16"."""
    import re

    from porter.lift.kernels import settings
    from porter.records import strip_comments

    code = strip_comments(code)  # a comment that says "half" computes nothing
    for precision, pattern in settings()["generate"]["reduced_precision"]:
        if re.search(pattern, code):
            return str(precision)
    return ""


def allowed(requirements: str) -> bool:
    """Whether the user's requirements permit reduced precision."""
    from porter.lift.kernels import settings

    text = requirements.lower()
    return any(word in text for word in settings()["generate"]["allow_words"])
