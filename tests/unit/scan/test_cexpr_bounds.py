"""porter.scan.cexpr on hostile input: nesting, shifts and magnitudes are ExprErrors, never a crash."""

from __future__ import annotations

import pytest

from porter.scan import cexpr


@pytest.mark.parametrize(
    "text",
    [
        "(" * 5000 + "1" + ")" * 5000,  # recursive descent
        "-" * 5000 + "1",
        "+".join(["1"] * 5000),  # a left-deep tree: the parser loops, the evaluator recurses
        "min(" * 3000 + "1" + ", 1)" * 3000,
    ],
)
def test_deep_nesting_is_an_expr_error(text: str) -> None:
    with pytest.raises(cexpr.ExprError, match="too deeply nested"):
        cexpr.eval_text(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 << 99999999", "shift count 99999999 out of range"),  # would build a 12 MB integer
        ("n << n << n", "shift count 4096 out of range"),
        ("1 << -1", "out of range"),
        ("99999999999999999999999", "integer overflow"),
        ("(1 << 40) * (1 << 40)", "integer overflow"),
        ("(int)1e400", "not an integer"),
    ],
)
def test_values_stay_within_64_bits(text: str, message: str) -> None:
    with pytest.raises(cexpr.ExprError, match=message):
        cexpr.eval_text(text, {"n": 4096})


def test_ordinary_wide_values_still_evaluate() -> None:
    assert cexpr.eval_text("1 << 63") == 1 << 63
    assert cexpr.eval_text("(1UL << 32) * (1UL << 31)") == 1 << 63
    assert cexpr.eval_text("n * n", {"n": 1 << 31}) == 1 << 62


def test_tree_walks_on_a_deep_tree_are_expr_errors() -> None:
    deep: cexpr.Expr = cexpr.Name("n")
    for _ in range(5000):
        deep = cexpr.Unary("-", deep)
    for walk in (cexpr.names, cexpr.calls, cexpr.render, lambda e: cexpr.substitute(e, {})):
        with pytest.raises(cexpr.ExprError, match="too deeply nested"):
            walk(deep)
