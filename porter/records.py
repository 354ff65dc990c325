"""The loop's plain data: what a screened candidate, an evaluation, an attempt and a loop's result are,
and their JSON forms.

Below the LLM layer (:mod:`porter.llm.loop` fills these in), the dialects (:mod:`porter.backends.dialect`,
whose ``screen`` returns these types), the harness (which evaluates a screened candidate) and the report
types (:mod:`porter.results`): it imports only :mod:`porter.model`, the usage and price table
(:mod:`porter.pricing`), redaction (:mod:`porter.redact`) and the standard library, never the
backends, the prompts or the loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from porter.model import Kernel, Status, Verdict
from porter.pricing import Usage, pricing_note
from porter.redact import redact

# Attempt statuses.
VALIDATED = "validated"
FAILED = "failed"  # compiled or not, but did not pass validation (or benchmarking)
REJECTED = "rejected"  # screened out before compiling
NO_CODE = "no-code"  # the reply held no usable code block
ERROR = "error"  # the request itself failed (timeout, HTTP error, malformed reply, replay miss)


# --------------------------------------------------------------------------- screening


@dataclass(frozen=True)
class Screened:
    """A candidate that passed screening: device code only, and the scan of its kernel."""

    code: str
    kernel: Kernel


@dataclass(frozen=True)
class Rejection:
    reason: str


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def strip_comments(code: str) -> str:
    """`code` with its comments blanked out (line numbers kept); string literals kept (a
    `system("...")` call keeps its argument)."""

    def keep(m: re.Match[str]) -> str:
        text = m.group(0)
        if text.startswith("//") or text.startswith("/*"):
            return " " * len(text) if "\n" not in text else "\n" * text.count("\n")
        return text

    return _COMMENT_OR_STRING.sub(keep, code)


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Evaluation:
    """What the harness said about one candidate (built by the workflow's evaluator)."""

    ok: bool  # validated on every device it ran on (and benchmarked where asked)
    stage: str  # "compile" | "validate" | "bench" | "done"
    reason: str
    log: str = ""  # the exact compiler log / validation details
    sizes: tuple[dict[str, int], ...] = ()  # sizes it passed
    checks: tuple[str, ...] = ()
    max_rel_err: float | None = None
    time_ms: float | None = None  # median on the first benchmarked device
    baseline_ms: float | None = None  # the original's median there
    speedup: float | None = None
    floor_ms: float | None = None  # the roofline floor there
    memory_bytes: int | None = None  # shared memory (+ registers where known) per block
    device: str = ""
    verdicts: tuple[Verdict, ...] = ()
    timings: tuple[dict[str, object], ...] = ()  # per device: device, time_ms, baseline_ms, speedup, ...


def unvalidated(verdicts: tuple[Verdict, ...]) -> Evaluation | None:
    """The evaluation of a candidate that did not validate on every device it ran on (the first
    failing device's stage, reason and log); None when it validated everywhere."""
    if not verdicts:
        return Evaluation(False, "validate", "no device here can run the candidate")
    bad = [v for v in verdicts if v.status is not Status.VALIDATED]
    if not bad:
        return None
    v = bad[0]
    return Evaluation(
        ok=False,
        stage="compile" if not v.compiled else "validate",
        reason=f"{v.device or v.backend}: {v.reason}",
        log="\n".join(v.logs),
        sizes=v.sizes,
        max_rel_err=v.max_rel_err,
        device=v.device,
        verdicts=verdicts,
    )


Evaluator = Callable[[Screened], Evaluation]


@dataclass(frozen=True)
class Attempt:
    candidate: int  # 1-based
    round: int  # 1-based
    status: str  # VALIDATED | FAILED | REJECTED | NO_CODE | ERROR
    reason: str
    code: str | None = None  # the screened device code
    evaluation: Evaluation | None = None
    usage: Usage = Usage()
    cost_usd: float = 0.0  # what this request cost (0 for cached / replayed replies)
    source: str = ""  # "api" | "cache" | "replay" | "" (no reply)
    reply_chars: int = 0
    transient: bool = False  # an ERROR worth asking again (timeout, 429/5xx, garbled reply): next round does


# --------------------------------------------------------------------------- the result


@dataclass
class Totals:
    usage: Usage = Usage()
    cost_usd: float = 0.0  # spent (API replies only)
    notional_usd: float = 0.0  # as if every reply came from the API: what the dollar budget counts
    requests: int = 0
    priced: bool = True

    @property
    def tokens(self) -> int:
        u = self.usage
        return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


@dataclass(frozen=True)
class LoopResult:
    attempts: tuple[Attempt, ...]
    rounds: int  # rounds run
    stop_reason: str
    totals: Totals
    notes: tuple[str, ...] = ()

    @property
    def validated(self) -> list[Attempt]:
        return [a for a in self.attempts if a.status == VALIDATED]

    @property
    def best(self) -> Attempt | None:
        """The fastest validated attempt (the first validated one when nothing was timed)."""
        return self.tradeoffs().get("fastest")

    def tradeoffs(self) -> dict[str, Attempt]:
        """fastest / least_memory / most_precise among distinct validated candidates."""
        seen: dict[str, Attempt] = {}
        for a in self.validated:
            seen.setdefault(a.code or "", a)
        return trade_off(list(seen.values()))


class Evaluated(Protocol):
    @property
    def evaluation(self) -> Evaluation | None: ...


_E = TypeVar("_E", bound=Evaluated)


def trade_off(pool: Sequence[_E]) -> dict[str, _E]:
    """The trade-off set of `pool`: the fastest (by the first timed device's median; untimed last), the
    least memory and the most precise (each where known; the faster on a tie); on a full tie the
    earlier in `pool`.  Empty when `pool` is."""
    if not pool:
        return {}

    def time_of(a: _E) -> float:
        t = a.evaluation.time_ms if a.evaluation else None
        return t if t is not None else float("inf")

    out: dict[str, _E] = {"fastest": min(pool, key=time_of)}
    with_memory = [a for a in pool if a.evaluation and a.evaluation.memory_bytes is not None]
    if with_memory:
        out["least_memory"] = min(with_memory, key=lambda a: (a.evaluation.memory_bytes, time_of(a)))  # type: ignore[union-attr]
    with_err = [a for a in pool if a.evaluation and a.evaluation.max_rel_err is not None]
    if with_err:
        out["most_precise"] = min(with_err, key=lambda a: (a.evaluation.max_rel_err, time_of(a)))  # type: ignore[union-attr]
    return out


def usage_doc(totals: Totals, provider: str = "", model: str = "") -> dict[str, object]:
    """The ``usage`` object of the JSON reports."""
    u = totals.usage
    doc: dict[str, object] = {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cost_usd": round(totals.cost_usd, 6) if totals.priced else None,
        "requests": totals.requests,
    }
    if provider and model and not totals.priced:
        doc["note"] = pricing_note(provider, model)
    return doc


def attempt_doc(a: Attempt) -> dict[str, object]:
    """One attempt as JSON (for report.json): no reply text, no secrets."""
    ev = a.evaluation
    doc: dict[str, object] = {
        "candidate": a.candidate,
        "round": a.round,
        "status": a.status,
        "reason": redact(a.reason),
        "source": a.source,
        "input_tokens": a.usage.input_tokens,
        "output_tokens": a.usage.output_tokens,
        "cost_usd": round(a.cost_usd, 6),
    }
    if ev is not None:
        doc.update(
            stage=ev.stage,
            device=ev.device,
            max_rel_err=ev.max_rel_err,
            time_ms=ev.time_ms,
            speedup=ev.speedup,
            memory_bytes=ev.memory_bytes,
            log=redact(ev.log),
        )
    return doc


__all__ = [
    "ERROR",
    "FAILED",
    "NO_CODE",
    "REJECTED",
    "VALIDATED",
    "Attempt",
    "Evaluation",
    "Evaluator",
    "LoopResult",
    "Rejection",
    "Screened",
    "Totals",
    "attempt_doc",
    "strip_comments",
    "trade_off",
    "unvalidated",
    "usage_doc",
]
