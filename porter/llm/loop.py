"""The generate -> compile -> validate -> repair loop.

``N`` candidates, each its own conversation with the model, run for up to ``R`` rounds.  In every
round each live candidate's request goes out concurrently (threads: the providers are blocking SDK
calls); the reply's code block is *screened* (:func:`screen`: only device code is taken, host code,
foreign ``#include``s, inline assembly and a changed kernel signature are rejected before anything is
compiled) and handed to the evaluator the workflow supplies (compile, validate, benchmark -- all in
the harness's isolated child processes; this module never compiles or runs anything itself).  The
outcome becomes the next user message of that candidate's conversation: the exact compiler log, the
validation mismatch, the timing against the original and the floor, a missing code block, or the
screening reason.  The loop stops at the budget: rounds, total tokens, dollars, wall time.

The result keeps every attempt, the best validated candidate (the fastest) and the trade-off set:
fastest, least memory, most precise.

Model output is data: the code block is only ever text handed to the evaluator after screening;
nothing in a reply or in the user's source is executed or turned into an action here.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Literal

from porter.backends import get_dialect, runtime_prefixes
from porter.errors import PorterError
from porter.llm.base import Completion, Message, PromptPart, Provider, ProviderError, checked_usage
from porter.llm.prompting import (
    PromptContext,
    compile_feedback,
    dialect,
    mismatch_feedback,
    nocode_feedback,
    rejected_feedback,
    settings,
    task_message,
    timing_feedback,
)
from porter.llm.replies import extract_code, missing_code_reason
from porter.model import Kernel
from porter.pricing import Usage, cost, pricing_note
from porter.records import (
    ERROR,
    FAILED,
    NO_CODE,
    REJECTED,
    VALIDATED,
    Attempt,
    Evaluation,
    Evaluator,
    LoopResult,
    Rejection,
    Screened,
    Totals,
    strip_comments,
)
from porter.redact import redact

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- screening


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.MULTILINE)
_ASM = re.compile(r"\b(asm|__asm__|__asm)\b")
# Attributes that make code run at load or exit time (never part of a kernel).
_LOAD_TIME = re.compile(
    r"\b(constructor|destructor|__constructor__|__destructor__|init_priority|section|__section__|ifunc)\b"
    r"|(\.(?:init|fini|preinit)_array|\.ctors|\.dtors)\b"
)
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")


def _type_key(type_text: str) -> str:
    """A parameter type without qualifiers or spaces: ``const float *__restrict__`` -> ``float*``."""
    return re.sub(r"\s+", "", _QUALIFIERS.sub(" ", type_text))


def signature_mismatch(original: Kernel, candidate: Kernel) -> str | None:
    """Why the candidate's kernel cannot be launched like the original, or None."""
    want = [f"{p.type} {p.name}" for p in original.params]
    got = [f"{p.type} {p.name}" for p in candidate.params]
    if len(original.params) != len(candidate.params):
        return (
            f"the kernel `{original.name}` must keep its {len(want)} parameters ({', '.join(want)}); "
            f"yours has {len(got)} ({', '.join(got) or 'none'})"
        )
    for i, (a, b) in enumerate(zip(original.params, candidate.params, strict=True), 1):
        if _type_key(a.type) != _type_key(b.type) or a.pointer != b.pointer or a.name != b.name:
            return (
                f"parameter {i} of `{original.name}` must be `{a.type} {a.name}` (same name and type, same order); "
                f"yours is `{b.type} {b.name}`"
            )
    if len(original.template_params) != len(candidate.template_params):
        return (
            f"the kernel `{original.name}` must keep its template parameters "
            f"<{', '.join(original.template_params)}>; yours has <{', '.join(candidate.template_params)}>"
        )
    return None


# Attribute-like groups that may stand in a declaration without making it a function's.
_ATTRIBUTE = re.compile(
    r"\b(?:__attribute__|__declspec|asm|__asm__|__asm|alignas|__align__|__launch_bounds__|__maxnreg__)"
    r"\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
)
_EXTERN = re.compile(r'\bextern\b\s*(?:"C(?:\+\+)?"\s*)?')


def extern_variable(text: str, host_globals: Sequence[str]) -> str | None:
    """Why `text` (comments stripped) reaches for data outside the kernel, or None: a name of the host
    process's globals (``environ``, ``stdout``...), or an ``extern`` declaration of a variable --
    whatever its qualifiers (``extern "C" __device__ char** environ;``) -- other than ``extern
    __shared__`` (dynamic shared memory).  ``extern "C"`` on a function or a block is fine."""
    names = (
        re.search(r"\b(" + "|".join(map(re.escape, host_globals)) + r")\b", text) if host_globals else None
    )
    if names is not None:
        return (
            f"the block names `{names.group(1)}`, a global of the host process: device code only reads "
            "its parameters and its own variables"
        )
    for m in _EXTERN.finditer(text):
        rest = text[m.end() :]
        if rest.startswith("{"):  # extern "C" { ... }: its declarations are checked like any other
            continue
        declaration = re.split(r"[;{=]", rest, maxsplit=1)[0]
        if "__shared__" in declaration:
            continue
        declaration = _ATTRIBUTE.sub(" ", declaration)
        function = re.search(r"\b[A-Za-z_]\w*\s*(?:<[^;{}]*>\s*)?\(", declaration)
        if function is not None and not re.search(r"\(\s*\*", declaration):
            continue
        shown = " ".join((text[m.start() : m.end()] + declaration).split())
        return (
            f"`{shown}` declares a variable defined outside the kernel: only `extern __shared__` arrays "
            "are accepted (a kernel's data comes through its parameters)"
        )
    return None


def screen(
    code: str,
    original: Kernel,
    dialect_key: str = "cuda",
    *,
    original_includes: Sequence[str] = (),
    allow_asm: bool = False,
    entry: str = "",
    signature: Sequence[str] = (),
) -> Screened | Rejection:
    """Take only device code from a model's code block, or say why the block is rejected.

    Rejected: an ``#include`` of anything but the dialect's standard headers and the original's own
    includes; inline assembly unless the original has it; ``main`` or any call of a process / file /
    environment function; a host function calling a runtime API; a kernel that is missing or whose
    parameters differ from the original's.  Host code that breaks none of these is dropped.

    A dialect may screen further (:meth:`porter.backends.dialect.Dialect.screen`; OpenCL C: no
    ``#include`` at all, no CUDA code, no host API call; the ``__kernel`` named ``entry`` (default: the
    original's name) must take ``signature``, the expected parameters in order).
    """
    rules = settings()["host"]
    assert isinstance(rules, dict)
    target = get_dialect(dialect_key)
    if not target.single_source:
        original_includes = ()  # a .cl file is compiled alone: the original's headers are not there
    allowed = set(dialect(dialect_key).headers) | set(original_includes)
    text = strip_comments(code)
    for m in _INCLUDE.finditer(text):
        if m.group(1).strip() not in allowed:
            return Rejection(
                f'#include "{m.group(1)}" is not allowed (only the dialect\'s standard headers'
                f"{' and the original' + chr(39) + 's own includes' if original_includes else ''})"
            )
    if not allow_asm and _ASM.search(text):
        return Rejection("inline assembly (`asm`) is not allowed: the original kernel has none")
    load_time = _LOAD_TIME.search(text)
    if load_time is not None:
        return Rejection(
            f"`{load_time.group(0)}` makes code run when the program is loaded or exits, outside any kernel: "
            "not accepted"
        )
    external = extern_variable(text, [str(n) for n in rules["host_globals"]])
    if external is not None:
        return Rejection(external)
    forbidden = [str(n) for n in rules["forbidden_calls"]]
    calls = re.findall(r"\b(" + "|".join(map(re.escape, forbidden)) + r")\s*\(", text)
    if calls:
        if "main" in calls:
            return Rejection("the block defines or calls main(): host code is not accepted, only the kernel")
        return Rejection(f"the block calls {calls[0]}(): host, process and file calls are not accepted")
    undefined = undefined_functions(text)
    if undefined:
        return Rejection(_undefined_reason(undefined))
    own = target.screen(code, original, entry or original.name, signature)
    if own is not None:
        return own

    from porter.scan import scan_source
    from porter.scan.extract import device_code

    device = device_code(code)
    kept = set(device.splitlines())
    dropped = "\n".join(
        line for line in strip_comments(code).splitlines() if line.strip() and line not in kept
    )
    prefixes = runtime_prefixes()
    api = re.search(r"\b((?:" + "|".join(prefixes) + r")[A-Z]\w*)\s*\(", dropped)
    if api:
        return Rejection(f"the block has host code calling {api.group(1)}(): only device code is accepted")
    try:
        scan = scan_source(device.encode("utf-8", "surrogateescape"), "candidate.cu", "cuda")
    except PorterError as err:
        return Rejection(f"the code block cannot be parsed: {err}")
    found = next((k for k in scan.kernels if k.name == original.name), None)
    if found is None:
        names = ", ".join(k.name for k in scan.kernels) or "none"
        return Rejection(
            f"the block has no __global__ kernel named `{original.name}` (kernels found: {names})"
        )
    why = signature_mismatch(original, found)
    if why is not None:
        return Rejection(why)
    return Screened(device if device.endswith("\n") else device + "\n", found)


_PROTOTYPE = re.compile(
    r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?;"
)
_DEFINITION = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?\{")
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "alignof", "static_assert"}


def _depths(text: str) -> list[int]:
    """The brace depth at every position of `text` (comments already blanked)."""
    depth, out = 0, []
    for ch in text:
        if ch == "}":
            depth -= 1
        out.append(depth)
        if ch == "{":
            depth += 1
    return out


def undefined_functions(text: str) -> list[str]:
    """Functions the block declares at file scope but never defines (`extern "C" int f(...);`): device
    code has no external functions, so such a name can only reach for the host's libraries."""
    depth = _depths(text)
    declared = [
        m.group(1)
        for m in _PROTOTYPE.finditer(text)
        if depth[m.start()] == 0 and m.group(1) not in _NOT_FUNCTIONS and not _is_variable(text, m.start())
    ]
    defined = {m.group(1) for m in _DEFINITION.finditer(text)}
    return sorted({name for name in declared if name not in defined})


def _is_variable(text: str, start: int) -> bool:
    """`dim3 grid(4);` or `T x(y);`-style initialisations have an `=`-free argument list of values;
    a prototype's list names types.  Treat a declaration whose line holds `=` as a variable."""
    line_start = text.rfind("\n", 0, start) + 1
    return "=" in text[line_start:start]


def _undefined_reason(names: Sequence[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:5])
    return (
        f"the block declares functions it never defines ({shown}): device code has no external "
        "functions; define every helper in the block"
    )


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class Budget:
    rounds: int = 3
    max_tokens: int | None = None  # input + output + cache tokens over all requests
    max_dollars: float | None = None  # priced as if every reply came from the API
    # Wall time: no round, request or retry starts after it, and a request in flight is cut off at it.
    max_seconds: float | None = None


@dataclass(frozen=True)
class LoopOptions:
    candidates: int = 2
    budget: Budget = Budget()
    max_reply_tokens: int = 8000
    temperature: float | None = None
    stream: bool = False  # stream replies (progress shows characters as they arrive)
    stop_when_validated: bool = False  # end a candidate's conversation once it validates


@dataclass(frozen=True)
class Event:
    """Progress: ``kind`` is "round" (a round starts), "request" (text arriving), "attempt" (one
    candidate's outcome) or "stop"."""

    kind: str
    round: int
    candidate: int = 0
    attempt: Attempt | None = None
    totals: Totals | None = None
    text: str = ""


Progress = Callable[[Event], None]


# --------------------------------------------------------------------------- the loop


@dataclass
class _Conversation:
    index: int
    messages: list[Message]
    alive: bool = True


def _evidence(attempt: Attempt, ctx: PromptContext) -> str | None:
    """The next user message for a candidate after `attempt`; None ends its conversation, "" sends the
    same conversation again (a transient failure: the model never answered, so there is nothing to add)."""
    if attempt.status == ERROR:
        return "" if attempt.transient else None
    if attempt.status == NO_CODE:
        return nocode_feedback(attempt.reason, ctx)
    if attempt.status == REJECTED:
        return rejected_feedback(attempt.reason, ctx)
    ev = attempt.evaluation
    assert ev is not None
    if attempt.status == VALIDATED:
        return timing_feedback(
            device=ev.device,
            time_ms=ev.time_ms,
            original_ms=ev.baseline_ms,
            floor_ms=ev.floor_ms,
            checks=ev.checks,
        )
    if ev.stage == "compile":
        return compile_feedback(ev.log or ev.reason)
    return mismatch_feedback(ev.reason, ev.sizes, ev.log)


def _code_key(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogateescape")).hexdigest()


class _Runner:
    def __init__(
        self,
        provider: Provider,
        system: list[PromptPart],
        ctx: PromptContext,
        evaluate: Evaluator,
        options: LoopOptions,
        progress: Progress | None,
    ):
        self.provider = provider
        self.system = system
        self.ctx = ctx
        self.evaluate = evaluate
        self.options = options
        self.progress = progress
        self.lock = threading.Lock()
        self.evaluated: dict[str, Evaluation] = {}
        self.totals = Totals()
        self.notes: list[str] = []
        self.deadline: float | None = None  # time.monotonic() when the time budget runs out

    def emit(self, event: Event) -> None:
        if self.progress is not None:
            self.progress(event)

    def ask(self, conv: _Conversation, round_no: int) -> Completion:
        on_text = None
        if self.options.stream:

            def on_text(piece: str) -> None:
                self.emit(Event("request", round_no, conv.index, text=piece))

        return self.provider.complete(
            self.system,
            list(conv.messages),
            max_tokens=self.options.max_reply_tokens,
            temperature=self.options.temperature,
            on_text=on_text,
            deadline=self.deadline,
        )

    def account(self, reply: Completion) -> tuple[Usage, float]:
        """Count `reply` in the totals: its usage (impossible counts rejected, see
        :func:`porter.llm.base.checked_usage`) and what it cost."""
        usage, problem = checked_usage(reply.usage)
        price = cost(usage, self.provider.name, self.provider.model)
        spent = price if (price is not None and reply.source == "api") else 0.0
        with self.lock:
            if problem is not None and problem not in self.notes:
                self.notes.append(problem)
            self.totals.usage = self.totals.usage + usage
            self.totals.requests += 1
            self.totals.cost_usd += spent
            if price is None:
                self.totals.priced = False
            else:
                self.totals.notional_usd += price
        return usage, spent

    def step(self, conv: _Conversation, round_no: int) -> Attempt:
        """One request and its evaluation for one candidate; never raises for what the model,
        the network or the harness does."""
        base = Attempt(candidate=conv.index, round=round_no, status=ERROR, reason="")
        try:
            reply = self.ask(conv, round_no)
        except ProviderError as err:  # ProviderTimeout, BudgetSpent, MalformedReply, ContextOverflow...
            return replace(base, reason=redact(str(err)), transient=err.transient)
        except PorterError as err:  # ReplayMiss...
            return replace(base, reason=redact(str(err)))
        except Exception as err:  # noqa: BLE001 - anything else from an SDK is this candidate's failure
            log.debug("request failed unexpectedly: %s", redact(repr(err)))
            where = f"{self.provider.name}:{self.provider.model}"
            return replace(
                base,
                reason=redact(
                    f"{where}: the request failed unexpectedly (a porter or SDK bug; please report it)"
                ),
            )
        usage, spent = self.account(reply)
        replied = replace(base, usage=usage, cost_usd=spent, source=reply.source, reply_chars=len(reply.text))
        conv.messages.append(Message("assistant", reply.text))
        block = extract_code(reply.text)
        if block is None:
            reason = missing_code_reason(reply.text) or "Your reply had no usable code block."
            if reply.truncated:
                reason = "Your reply was cut off at the token limit. " + reason
            return replace(replied, status=NO_CODE, reason=reason)
        screened = screen(
            block.code,
            self.ctx.kernel,
            self.ctx.dialect,
            original_includes=self.ctx.original_includes,
            allow_asm=bool(re.search(r"\basm\b|__asm__", self.ctx.source)),
            entry=self.ctx.entry,
            signature=self.ctx.signature,
        )
        if isinstance(screened, Rejection):
            return replace(replied, status=REJECTED, reason=screened.reason)
        key = _code_key(screened.code)
        with self.lock:
            known = self.evaluated.get(key)
        if known is None:
            try:
                known = self.evaluate(screened)
            except PorterError as err:  # the evaluator turns failures into data; this is the backstop
                known = Evaluation(ok=False, stage="validate", reason=f"evaluation failed: {err}")
            with self.lock:
                self.evaluated[key] = known
        status = VALIDATED if known.ok else FAILED
        return replace(replied, status=status, reason=known.reason, code=screened.code, evaluation=known)

    def over_budget(self, started: float) -> str | None:
        b = self.options.budget
        if b.max_tokens is not None and self.totals.tokens >= b.max_tokens:
            return f"token budget spent ({self.totals.tokens} of {b.max_tokens} tokens)"
        if b.max_dollars is not None and self.totals.notional_usd >= b.max_dollars:
            return f"dollar budget spent (${self.totals.notional_usd:.4f} of ${b.max_dollars:.4f})"
        if b.max_seconds is not None and time.monotonic() - started >= b.max_seconds:
            return f"time budget spent ({b.max_seconds:g} s)"
        return None


class _Pool(ThreadPoolExecutor):
    """The candidates' threads.  Left by an exception (Ctrl-C, SIGTERM, a failure) it does not wait for
    the requests still in flight -- their timeout can be minutes -- so the caller can write what was
    validated at once; a normal end waits as usual."""

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        self.shutdown(wait=exc_type is None, cancel_futures=exc_type is not None)
        return False


def run_loop(
    provider: Provider,
    ctx: PromptContext,
    evaluate: Evaluator,
    options: LoopOptions = LoopOptions(),
    *,
    system: list[PromptPart] | None = None,
    progress: Progress | None = None,
) -> LoopResult:
    """Run the loop; see the module docstring.  `system` defaults to
    :func:`porter.llm.prompting.system_parts` of `ctx`."""
    from porter.llm.prompting import system_parts

    n = max(1, options.candidates)
    runner = _Runner(
        provider, system or system_parts(ctx), ctx, evaluate, replace(options, candidates=n), progress
    )
    if options.budget.max_dollars is not None and pricing_note(provider.name, provider.model):
        runner.notes.append(
            (pricing_note(provider.name, provider.model) or "") + "; the dollar budget cannot be enforced"
        )
    convs = [_Conversation(i, [Message("user", task_message(ctx, i, n))]) for i in range(1, n + 1)]
    attempts: list[Attempt] = []
    started = time.monotonic()
    if options.budget.max_seconds is not None:
        runner.deadline = started + options.budget.max_seconds
    rounds = 0
    stop = ""
    with _Pool(max_workers=n, thread_name_prefix="porter-llm") as pool:
        while True:
            if rounds >= options.budget.rounds:
                stop = f"all {options.budget.rounds} round(s) done"
                break
            why = runner.over_budget(started)
            if why is not None:
                stop = why
                break
            live = [c for c in convs if c.alive]
            if not live:
                stop = "no candidate left to continue"
                break
            rounds += 1
            runner.emit(Event("round", rounds, totals=runner.totals))
            futures = [(c, pool.submit(runner.step, c, rounds)) for c in live]
            for conv, fut in futures:
                attempt = fut.result()
                attempts.append(attempt)
                runner.emit(Event("attempt", rounds, conv.index, attempt=attempt, totals=runner.totals))
                follow = _evidence(attempt, ctx)
                if follow is None or (options.stop_when_validated and attempt.status == VALIDATED):
                    conv.alive = False
                elif follow:
                    conv.messages.append(Message("user", follow))
    result = LoopResult(
        attempts=tuple(attempts),
        rounds=rounds,
        stop_reason=stop,
        totals=runner.totals,
        notes=tuple(runner.notes),
    )
    runner.emit(Event("stop", rounds, totals=runner.totals, text=stop))
    return result


__all__ = [
    "Budget",
    "Event",
    "LoopOptions",
    "Progress",
    "run_loop",
    "screen",
    "signature_mismatch",
]
