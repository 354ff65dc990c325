"""The options the single-file workflows share, as objects: the model a workflow asks and how
(:class:`ModelOptions`), where and how it writes what it made (:class:`OutputOptions`) and how it
builds, runs and times kernels (:class:`RunOptions`; the build's ``-I``/``-D``/``-U`` are a
:class:`porter.defines.BuildFlags`, as a program port's are).  The command line (:mod:`porter.cli`)
builds them from its arguments; a workflow takes each whole instead of a dozen loose parameters
threaded through every call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from porter.defines import BuildFlags
from porter.harness.trial import ValidateOptions
from porter.llm.base import DEFAULT_RETRIES, DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from porter.backends import Device
    from porter.harness.bench import BenchPlan
    from porter.llm.base import Provider
    from porter.llm.cache import ReplyCache
    from porter.llm.loop import LoopOptions

R = TypeVar("R")


@dataclass(frozen=True)
class ModelOptions:
    """The model a workflow asks (``port --model``, ``optimize``), and how.

    ``name``: ``anthropic:<name>`` or ``openai:<name>``; ``base_url``: the API endpoint; ``replay`` /
    ``record``: serve the replies recorded in a folder (no network, no key) / record every reply to one;
    ``candidates``: concurrent conversations (None: the command's own default); ``rounds``: rounds of
    generate, validate, repair; ``request_timeout`` / ``retries``: per request; ``max_dollars`` /
    ``max_tokens_total`` / ``max_seconds``: the budget (None: no limit); ``max_reply_tokens``: per reply;
    ``stream``: replies streamed; ``opened``: a provider the caller opened (a test's fake server),
    asked instead of ``name``'s; ``reply_cache``: where replies are cached (None: the default cache)."""

    name: str
    base_url: str | None = None
    replay: str | None = None
    record: str | None = None
    candidates: int | None = None
    rounds: int = 3
    request_timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    max_dollars: float | None = None
    max_tokens_total: int | None = None
    max_seconds: float | None = None
    max_reply_tokens: int = 8000
    stream: bool = False
    opened: Provider | None = None
    reply_cache: ReplyCache | None = None

    def provider(self) -> Provider:
        """``opened``, else the provider of ``name`` (:func:`porter.llm.cache.open_provider`: a missing
        key or a bad ``record`` folder is a UsageError before any request)."""
        if self.opened is not None:
            return self.opened
        from porter.llm.cache import open_provider

        return open_provider(
            self.name,
            base_url=self.base_url,
            replay=self.replay,
            record=self.record,
            timeout=self.request_timeout,
            max_retries=self.retries,
            cache=self.reply_cache,
        )

    def count(self, default: int) -> int:
        """The conversations to hold: ``candidates``, else the command's `default`."""
        return self.candidates if self.candidates is not None else default

    def loop(self, candidates: int) -> LoopOptions:
        """The LLM loop's options: the budget, the reply limit and streaming (`candidates`: the
        command's default where none was given)."""
        from porter.llm.loop import Budget, LoopOptions

        budget = Budget(
            rounds=self.rounds,
            max_tokens=self.max_tokens_total,
            max_dollars=self.max_dollars,
            max_seconds=self.max_seconds,
        )
        return LoopOptions(
            candidates=self.count(candidates),
            budget=budget,
            max_reply_tokens=self.max_reply_tokens,
            stream=self.stream,
        )


@dataclass(frozen=True)
class OutputOptions(Generic[R]):
    """Where a workflow writes and how its report ``R`` is shown: ``out_dir`` (None: the workflow's
    folder beside the input), ``fresh`` (start over instead of resuming the previous report there),
    ``markdown`` (renders ``report.md``) and ``chart`` (draws a chart into the path it is given and
    returns it); without a view, its file is not written."""

    out_dir: str | None = None
    fresh: bool = False
    markdown: Callable[[R], str] | None = None
    chart: Callable[[R, Path], str] | None = None


@dataclass(frozen=True)
class RunOptions:
    """How a workflow builds, runs and times kernels.

    ``flags``: the build's ``-I`` / ``-D NAME[=VALUE]`` / ``-U NAME`` (every compile, and size
    inference, gets the macros); ``devices``: where kernels run (None: every device here that can);
    ``validate``: how a variant is judged (trials, tolerances, child timeouts, the compile's other
    options); ``seed``: of the inputs drawn (the autotuner's); ``bench``: the timing plan (None: each
    device's default); ``sizes``: size-symbol values to time at (``--size``); ``gpu_elements``: the
    elements of a kernel's largest array when timed on a GPU (None: the default)."""

    flags: BuildFlags = field(default_factory=BuildFlags)
    devices: tuple[Device, ...] | None = None
    validate: ValidateOptions | None = None
    seed: int = 20241202
    bench: BenchPlan | None = None
    sizes: Mapping[str, int] | None = None
    gpu_elements: int | None = None

    @property
    def include_dirs(self) -> tuple[str, ...]:
        return self.flags.include_dirs

    @property
    def defines(self) -> tuple[str, ...]:
        return self.flags.defines

    def validation(self) -> ValidateOptions:
        """``validate`` (its defaults when None), with the build's ``-D`` in its compiles."""
        options = self.validate or ValidateOptions()
        if not self.defines:
            return options
        return replace(options, compile=replace(options.compile, defines=self.defines))
