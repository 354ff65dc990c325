"""`optimize --model --tune`: the launch search's fastest configurations join the trade-off set, timed
again by optimize's own evaluator (the tuner's times are at its own size and are not compared)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from porter.model import KernelSpec, Variant
from porter.records import VALIDATED, Attempt, Evaluation
from porter.results import TUNED, TunedConfig, TuneReport
from porter.workflows.optimize import _configurations

SPEC = KernelSpec("k", (), ("(n + 255) / 256",), ("256",), sizes=({"n": 1000},))
ORIGINAL = Variant("k", "cuda", "__global__ void k(float* x, int n) {}\n", "k", "original")
REWRITE = Attempt(1, 1, VALIDATED, "ok", "__global__ void k(float* x, int n) { /* faster */ }\n",
                  Evaluation(True, "done", "ok", time_ms=1.0))  # fmt: skip
BY_THE_MODEL = "the model's fastest (candidate 1, round 1)"


@dataclass
class Measuring:
    """optimize's evaluator as _configurations uses it: what it was asked to time, and a time per block."""

    spec: KernelSpec = SPEC
    original: Variant = ORIGINAL
    asked: list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], Any]] = field(
        default_factory=list
    )
    occupancy: bool = True  # whether a device reports the memory a block uses (a GPU's does)

    def variant(self, code: str) -> Variant:
        return Variant("k", "cuda", code, "k", "llm:openai:m")

    def measure(
        self, variant: Variant, spec: KernelSpec | None = None, flags: Any = (), on: Any = None
    ) -> tuple[list[dict[str, Any]], int | None, None]:
        assert spec is not None
        self.asked.append((variant.provenance, spec.block, spec.grid, tuple(flags), on))
        ms = 10.0 / int(spec.block[0])  # its own measurement, not the tuner's
        memory = 1024 + int(spec.block[0]) if self.occupancy else None
        return [{"device": "gpu:0", "time_ms": ms, "speedup": 0.04 / ms}], memory, None


def row(label: str, block: str, ms: float | None, *, source: str = "", original: bool = False,
        flags: tuple[str, ...] = (), validated: bool = True, suspect: bool = False) -> TunedConfig:  # fmt: skip
    grid = f"(n + {int(block) - 1}) / {block}"
    return TunedConfig(label, [block], [grid], validated, ms, "validated", original, list(flags), suspect,
                       source=source, max_rel_err=0.0 if validated else None)  # fmt: skip


def search(*configs: TunedConfig) -> TuneReport:
    return TuneReport("k.cu", "k", "gpu:0", "out/tuned", "inferred", {"n": 1 << 24}, configs=list(configs))


def test_each_kernels_fastest_configuration_joins_timed_by_the_evaluator() -> None:
    ev = Measuring()
    tuned = search(
        row("the original's", "256", 0.05, original=True),
        row("block 512", "512", 0.03),
        row("block 1024", "1024", 0.02, suspect=True),  # below the floor: never chosen
        row("block 128", "128", 0.01, validated=False),  # rejected: never chosen
        row(f"{BY_THE_MODEL}, the original's", "256", 0.04, source=BY_THE_MODEL),
        row(f"{BY_THE_MODEL}, block 128", "128", 0.035, source=BY_THE_MODEL, flags=("-Xptxas=-dlcm=cs",)),
    )
    got = _configurations(tuned, ev, REWRITE)  # type: ignore[arg-type]
    assert [c.label for c in got] == ["tuned: block 512", f"tuned: {BY_THE_MODEL}, block 128"]
    assert all(c.kind == TUNED for c in got)
    original, rewrite = got
    assert ev.asked == [
        ("original", ("512",), ("(n + 511) / 512",), (), None),  # on every device
        # the model's code (built as untrusted); options timed only where the search validated them
        ("llm:openai:m", ("128",), ("(n + 127) / 128",), ("-Xptxas=-dlcm=cs",), {"gpu:0"}),
    ]
    assert original.evaluation.time_ms == 10.0 / 512 and original.evaluation.memory_bytes == 1024 + 512
    assert original.code == ORIGINAL.source and original.attempt is None
    assert rewrite.code == REWRITE.code and rewrite.attempt is REWRITE
    assert rewrite.launch is not None and rewrite.launch.flags == ["-Xptxas=-dlcm=cs"]
    assert original.evaluation.max_rel_err == 0.0 and "launch search" in original.evaluation.reason


def test_a_kernels_fastest_at_its_own_launch_is_not_a_second_contender() -> None:
    ev = Measuring()
    tuned = search(
        row("the original's", "256", 0.03, original=True),
        row("block 512", "512", 0.05),
        row(f"{BY_THE_MODEL}, the original's", "256", 0.02, source=BY_THE_MODEL),
    )
    assert _configurations(tuned, ev, REWRITE) == [] and ev.asked == []  # type: ignore[arg-type]
    # the same launch spelled another way (the search derives its grid from the original's threads)
    respelled = row(f"{BY_THE_MODEL}, block 256", "256", 0.01, source=BY_THE_MODEL)
    respelled.grid = ["(((n + 255) / 256) * (256) + 255) / 256"]
    assert _configurations(search(tuned.configs[0], respelled), ev, REWRITE) == []  # type: ignore[arg-type]
    # with compile options, the original's launch is another configuration
    flagged = search(row("the original's", "256", 0.03, original=True),
                     row("the original's + -Xptxas=-dlcm=cs", "256", 0.02, flags=("-Xptxas=-dlcm=cs",)))  # fmt: skip
    (only,) = _configurations(flagged, ev, None)  # type: ignore[arg-type]
    assert only.launch is not None and only.launch.flags == ["-Xptxas=-dlcm=cs"]


def test_where_no_device_reports_a_blocks_memory_the_kernels_own_figure_stands() -> None:
    rewrite = Attempt(
        1, 1, VALIDATED, "ok", REWRITE.code, Evaluation(True, "done", "ok", time_ms=1.0, memory_bytes=64)
    )
    tuned = search(row("the original's", "256", 0.05, original=True), row("block 512", "512", 0.03),
                   row(f"{BY_THE_MODEL}, block 128", "128", 0.02, source=BY_THE_MODEL))  # fmt: skip
    got = _configurations(tuned, Measuring(occupancy=False), rewrite, original_memory=256)  # type: ignore[arg-type]
    assert [c.evaluation.memory_bytes for c in got] == [256, 64]
