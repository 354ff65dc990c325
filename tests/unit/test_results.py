"""optimize's trade-off set: the original, the model's validated rewrites and the launch search's
configurations in one pool, each role chosen on the same measurement."""

from __future__ import annotations

from collections.abc import Sequence

from porter.records import FAILED, VALIDATED, Attempt, Evaluation, LoopResult, Totals
from porter.results import ORIGINAL, REWRITE, TUNED, Contender, OptimizeReport, TunedConfig


def evaluation(ms: float | None, memory: int | None, err: float | None) -> Evaluation:
    timings = ({"device": "gpu:0", "time_ms": ms, "speedup": None},) if ms is not None else ()
    return Evaluation(True, "done", "ok", time_ms=ms, memory_bytes=memory, max_rel_err=err, device="gpu:0",
                      timings=timings)  # fmt: skip


def attempt(candidate: int, ms: float, memory: int, err: float, status: str = VALIDATED) -> Attempt:
    code = f"__global__ void k{candidate}() {{}}\n"
    return Attempt(candidate, 1, status, "ok", code, evaluation(ms, memory, err))


def report(
    attempts: list[Attempt], original: Contender | None, tuned: Sequence[Contender] = ()
) -> OptimizeReport:
    r = OptimizeReport(source="k.cu", kernel="k", model="openai:m", out_dir="out", devices=("gpu:0",),
                       loop=LoopResult(tuple(attempts), 1, "rounds", Totals()))  # fmt: skip
    r.original, r.configurations = original, list(tuned)
    return r


ORIG = Contender(ORIGINAL, "the original", "orig", evaluation(2.0, 4096, 0.0))
CONFIG = TunedConfig("block 512", ["512"], ["(n + 511) / 512"], True, 1.0, "validated", max_rel_err=0.0)


def test_the_original_takes_a_role_only_by_being_strictly_better_and_never_the_best_file() -> None:
    slow, lean = attempt(1, 3.0, 8192, 1e-6), attempt(2, 2.5, 2048, 2e-6)
    roles = report([slow, lean], ORIG).roles()
    assert roles["fastest"].kind == ORIGINAL  # 2.0 ms: both rewrites are slower
    assert roles["best"].label == "candidate 2 (round 1)"  # what the run proposes: the fastest rewrite
    assert roles["least_memory"].attempt is lean  # 2048 B beats the original's 4096
    assert roles["most_precise"].kind == ORIGINAL  # error 0 against itself; both rewrites are above it
    exact, exact_fast = attempt(3, 4.0, 8192, 0.0), attempt(4, 1.0, 8192, 0.0)
    assert report([slow, exact], ORIG).roles()["most_precise"].kind == ORIGINAL  # equally exact, faster
    assert report([slow, exact_fast], ORIG).roles()["most_precise"].attempt is exact_fast
    tie = attempt(5, 2.0, 4096, 0.0)
    assert report([tie], ORIG).roles()["fastest"].attempt is tie  # a full tie: the original must be better


def test_a_tuned_configuration_joins_the_pool_and_can_be_the_fastest() -> None:
    tuned = Contender(TUNED, "tuned: block 512", "orig", evaluation(1.5, 6144, 0.0), launch=CONFIG)
    r = report([attempt(1, 1.8, 2048, 1e-7)], ORIG, [tuned])
    roles = r.roles()
    assert roles["fastest"] is tuned and roles["best"] is tuned
    assert roles["least_memory"].kind == REWRITE and roles["most_precise"] is tuned  # error 0, and faster
    assert [c.kind for c in r.pool()] == [REWRITE, TUNED, ORIGINAL]
    assert r.best is not None and r.best.candidate == 1  # the model's fastest rewrite, for --tune's search
    assert r.exit_code == 0


def test_without_a_rewrite_or_configuration_there_is_no_trade_off_set() -> None:
    failed = attempt(1, 1.0, 1, 0.0, status=FAILED)
    r = report([failed], ORIG)
    assert r.pool() == [] and r.roles() == {} and r.exit_code == 1 and r.best is None


def test_the_same_code_validated_twice_is_one_contender_and_untimed_ones_rank_last() -> None:
    a, again = attempt(1, 2.0, 100, 0.0), attempt(1, 1.0, 100, 0.0)
    again = Attempt(1, 2, VALIDATED, "ok", a.code, evaluation(1.0, 100, 0.0))
    untimed = Attempt(2, 1, VALIDATED, "ok", "__global__ void u() {}\n", evaluation(None, 50, 0.0))
    r = report([a, again, untimed], None)
    assert [c.label for c in r.rewrites()] == ["candidate 1 (round 1)", "candidate 2 (round 1)"]
    roles = r.roles()
    assert roles["fastest"].attempt is a and roles["least_memory"].attempt is untimed


def test_the_report_documents_every_contender_and_the_roles() -> None:
    tuned = Contender(TUNED, "tuned: block 512", "orig", evaluation(1.5, 6144, 0.0), launch=CONFIG)
    r = report([attempt(1, 1.8, 2048, 1e-7)], ORIG, [tuned])
    doc = r.full_document()
    kinds = {c["label"]: c["kind"] for c in doc["contenders"]}
    assert kinds == {"candidate 1 (round 1)": REWRITE, "tuned: block 512": TUNED,
                     "the original": ORIGINAL}  # fmt: skip
    launch = next(c["launch"] for c in doc["contenders"] if c["kind"] == TUNED)
    assert launch == {"block": ["512"], "grid": ["(n + 511) / 512"], "shared": None, "flags": []}
    assert next(c["path"] for c in doc["contenders"] if c["kind"] == ORIGINAL) == "k.cu"
