"""porter.scan.python: the tree-sitter queries, loop-nest extraction and dependence classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porter import grammars
from porter.model import FileScan, LoopKind, LoopNest, to_jsonable
from porter.scan.python import scan_python

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "python"
SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "python"


def scan_file(path: Path) -> FileScan:
    return scan_python(str(path), path.read_bytes())


def nests(path: Path) -> dict[str, list[LoopNest]]:
    out: dict[str, list[LoopNest]] = {}
    for nest in scan_file(path).loops:
        out.setdefault(nest.function, []).append(nest)
    return out


def only(path: Path, function: str) -> LoopNest:
    found = nests(path)[function]
    assert len(found) == 1, found
    return found[0]


def parse(source: str):
    return grammars.parser("python").parse(source.encode()).root_node


def texts(nodes) -> list[str]:
    return [n.text.decode() for n in nodes]


# --------------------------------------------------------------------------- the queries, one by one


def test_functions_query_finds_functions_methods_and_nested_functions():
    root = parse(
        "def f(a, b=1, *rest, c: int = 2, **kw):\n    pass\n"
        "class C:\n    def m(self):\n        def inner(x):\n            return x\n"
    )
    found = grammars.captures("python-functions", root)
    assert texts(found["function.name"]) == ["f", "m", "inner"]
    assert texts(found["function.params"])[0] == "(a, b=1, *rest, c: int = 2, **kw)"
    assert len(found["function.body"]) == 3


def test_loops_query_matches_range_loops_only():
    root = parse(
        "for i in range(n):\n    pass\n"
        "for j in prange(1, m, 2):\n    pass\n"
        "for k in nb.prange(n):\n    pass\n"
        "for x in items:\n    pass\n"
        "for i, v in enumerate(a):\n    pass\n"
        "for r in ranges(n):\n    pass\n"
        "while n:\n    n -= 1\n"
    )
    found = grammars.captures("python-loops", root)
    assert texts(found["loop.var"]) == ["i", "j", "k"]
    assert texts(found["loop.bounds"]) == ["(n)", "(1, m, 2)", "(n)"]
    assert texts(found["loop.range"]) == ["range", "prange", "nb.prange"]


def test_subscripts_query_matches_every_subscript_of_a_chain():
    root = parse("y = a[i] + b[i, j] + c[i][j] + d[idx[i]]\n")
    found = texts(grammars.captures("python-subscripts", root)["subscript"])
    assert sorted(found) == sorted(["a[i]", "b[i, j]", "c[i][j]", "c[i]", "d[idx[i]]", "idx[i]"])


def test_assignments_query_separates_plain_and_augmented_assignments():
    root = parse("x = 1\na[i] = b\nx, y = 1, 2\ns += a[i]\nh[k] ^= 3\n")
    found = grammars.captures("python-assignments", root)
    assert texts(found["assign.target"]) == ["x", "a[i]", "x, y"]
    assert texts(found["update.target"]) == ["s", "h[k]"]
    assert texts(found["update.operator"]) == ["+=", "^="]


def test_reductions_query_names_each_candidate_form():
    root = parse(
        "s += a\n"
        "s -= a\n"
        "s = s * a\n"
        "s = s - a\n"
        "m = max(m, a)\n"
        "m = np.minimum(m, a)\n"
        "m = f(m, a)\n"
        "if a > m:\n    m = a\n"
        "if a > m:\n    m = a\n    k = i\n"
        "if a > m:\n    m = a\nelse:\n    m = 0\n"
    )
    kinds = []
    for _, match in grammars.matches("python-reductions", root):
        statement = next(name for name in match if name.count(".") == 1 and name.split(".")[1] in _STATEMENTS)
        kinds.append((statement, match["reduce.target"][0].text.decode()))
    assert kinds == [
        ("reduce.augmented", "s"),
        ("reduce.binary", "s"),
        ("reduce.max", "m"),
        ("reduce.min", "m"),
        ("reduce.select", "m"),
    ]


_STATEMENTS = ("augmented", "binary", "max", "min", "select")


def test_effects_query_finds_exits_method_calls_and_ordered_builtins():
    root = parse(
        "for i in range(n):\n"
        "    if a[i]:\n        break\n"
        "    out.append(a[i])\n"
        "    print(a[i], len(a))\n"
        "    raise ValueError\n"
        "def g():\n    yield 1\n    return 2\n"
    )
    found = grammars.captures("python-effects", root)
    assert len(found["exit.break"]) == 1
    assert len(found["exit.raise"]) == 1
    assert len(found["exit.yield"]) == 1
    assert len(found["exit.return"]) == 1
    assert texts(found["call.receiver"]) == ["out"]
    assert texts(found["call.method"]) == ["append"]
    assert texts(found["call.builtin"]) == ["print"]


# --------------------------------------------------------------------------- the samples

SAMPLE_CASES = [
    ("loops_map.py", "saxpy", LoopKind.MAP, None, "writes y[i] only; reads x[i], y[i]"),
    ("loops_map.py", "scale_add_2d", LoopKind.MAP, None, "writes out[i, j] only"),
    ("loops_map.py", "gaussian_activation", LoopKind.MAP, None, "v private to each iteration"),
    ("loops_reduction.py", "total", LoopKind.REDUCTION, "+", "accumulates s += x[i] (associative +)"),
    ("loops_reduction.py", "dot", LoopKind.REDUCTION, "+", "accumulates s += x[i] * y[i]"),
    ("loops_reduction.py", "maximum", LoopKind.REDUCTION, "max", "m = max(m, x[i])"),
    ("loops_reduction.py", "count_cells", LoopKind.REDUCTION, "+", "hist[x[i]] += 1"),
    ("loops_stencil.py", "blur3", LoopKind.STENCIL, None, "reads a[i - 1], a[i + 1] and writes out[i]"),
    ("loops_stencil.py", "jacobi2d", LoopKind.STENCIL, None, "grid[y - 1, x], grid[y + 1, x]"),
    (
        "loops_sequential.py",
        "prefix_sum",
        LoopKind.SEQUENTIAL,
        None,
        "reads out[i - 1] written by the previous",
    ),
    (
        "loops_sequential.py",
        "recurrence",
        LoopKind.SEQUENTIAL,
        None,
        "reads y[i - 1] written by the previous",
    ),
    (
        "loops_sequential.py",
        "smooth_in_place",
        LoopKind.SEQUENTIAL,
        None,
        "reads v[i - 1] written by the previous",
    ),
]


@pytest.mark.parametrize(("file", "function", "kind", "op", "reason"), SAMPLE_CASES)
def test_sample_loops_are_classified(file, function, kind, op, reason):
    nest = only(SAMPLES / file, function)
    assert nest.kind is kind, nest.reason
    assert nest.reduction_op == op
    assert reason in nest.reason
    assert "\n" not in nest.reason


def test_sample_nest_details():
    jacobi = only(SAMPLES / "loops_stencil.py", "jacobi2d")
    assert jacobi.vars == ("y", "x")
    assert jacobi.bounds == ("1, ny - 1", "1, nx - 1")
    assert jacobi.params == ("grid", "out")
    assert [(w.array, w.index) for w in jacobi.writes] == [("out", ("y", "x"))]
    assert [(r.array, r.index) for r in jacobi.reads] == [
        ("grid", ("y - 1", "x")),
        ("grid", ("y + 1", "x")),
        ("grid", ("y", "x - 1")),
        ("grid", ("y", "x + 1")),
    ]
    assert (jacobi.line, jacobi.end_line) == (22, 24)
    hist = only(SAMPLES / "loops_reduction.py", "count_cells")
    assert [(w.array, w.index) for w in hist.writes] == [("hist", ("x[i]",))]
    assert ("hist", ("x[i]",)) in [(r.array, r.index) for r in hist.reads]  # += reads the cell too
    assert ("x", ("i",)) in [(r.array, r.index) for r in hist.reads]


def test_every_sample_function_with_a_loop_is_reported():
    for path in sorted(SAMPLES.glob("loops_*.py")):
        scan = scan_file(path)
        assert scan.language == "python"
        assert scan.warnings == ()
        names = {nest.function for nest in scan.loops}
        assert names, path
        assert all(nest.kind in LoopKind for nest in scan.loops)


# --------------------------------------------------------------------------- our fixtures

FIXTURE_CASES = [
    # maps, including ones a keyword matcher gets wrong
    ("maps.py", "private_temporary", LoopKind.MAP, None, "t, u private to each iteration"),
    ("maps.py", "conditional_write", LoopKind.MAP, None, "writes out[i] only"),
    ("maps.py", "both_branches", LoopKind.MAP, None, "t private"),
    ("maps.py", "linear_index", LoopKind.MAP, None, "writes out[i * m + j] only"),
    ("maps.py", "temporary_index", LoopKind.MAP, None, "writes out[k] only"),
    ("maps.py", "nested_subscripts", LoopKind.MAP, None, "writes out[i, j] only"),
    ("maps.py", "row_slices", LoopKind.MAP, None, "writes out[i, :] only"),
    ("maps.py", "reversed_copy", LoopKind.MAP, None, "writes out[n - 1 - i] only"),
    ("maps.py", "scratch_per_iteration", LoopKind.MAP, None, "tmp private"),
    ("maps.py", "in_place_same_index", LoopKind.MAP, None, "reads x[i]"),
    ("maps.py", "Scaler.apply", LoopKind.MAP, None, "no loop-carried state"),
    ("maps.py", "outer.<locals>.inner", LoopKind.MAP, None, "writes res[j] only"),
    ("maps.py", "outer", LoopKind.MAP, None, "writes out[i] only"),
    ("maps.py", "gather", LoopKind.MAP, None, "reads a[idx[i]], idx[i]"),
    ("maps.py", "per_row_append", LoopKind.MAP, None, "reads rows[i]"),
    ("maps.py", "element_attribute", LoopKind.MAP, None, "writes nodes[i] only"),
    # reductions
    ("reductions.py", "total_2d", LoopKind.REDUCTION, "+", "total += a[i, j] over i, j"),
    ("reductions.py", "row_sums", LoopKind.REDUCTION, "+", "row_sum[i] += a[i, j] over j (associative +)"),
    ("reductions.py", "matvec", LoopKind.REDUCTION, "+", "s += a[i, j] * x[j] over j"),
    ("reductions.py", "product", LoopKind.REDUCTION, "*", "p *= x[i]"),
    ("reductions.py", "select_max", LoopKind.REDUCTION, "max", "if x[i] > best: best = x[i]"),
    ("reductions.py", "minimum", LoopKind.REDUCTION, "min", "lo = min(lo, x[i])"),
    ("reductions.py", "positive_sum", LoopKind.REDUCTION, "+", "s = s + x[i] + 1.0"),
    ("reductions.py", "any_flags", LoopKind.REDUCTION, "|", "flags |= mask[i]"),
    ("reductions.py", "convolve", LoopKind.REDUCTION, "+", "out[i] += w[t] * a[i + t] over t"),
    ("reductions.py", "scatter_scale", LoopKind.REDUCTION, "*", "out[idx[i]] = out[idx[i]] * 2.0"),
    # stencils
    ("stencils.py", "forward_difference", LoopKind.STENCIL, None, "reads a[i + 1] and writes out[i]"),
    ("stencils.py", "flat_neighbours", LoopKind.STENCIL, None, "a[i * m + j - 1], a[i * m + j + 1]"),
    ("stencils.py", "offset_window", LoopKind.STENCIL, None, "reads a[base + i + 1]"),
    # sequential: each names its dependence
    ("sequential.py", "linear_recurrence", LoopKind.SEQUENTIAL, None, "carries x from one iteration"),
    ("sequential.py", "early_break", LoopKind.SEQUENTIAL, None, "break at line 13"),
    ("sequential.py", "early_return", LoopKind.SEQUENTIAL, None, "return at line 20"),
    ("sequential.py", "last_write_wins", LoopKind.SEQUENTIAL, None, "writes out[0] in every iteration"),
    ("sequential.py", "halved_index", LoopKind.SEQUENTIAL, None, "writes out[i // 2]"),
    (
        "sequential.py",
        "scattered_overwrite",
        LoopKind.SEQUENTIAL,
        None,
        "not derivable from the loop variables",
    ),
    ("sequential.py", "shared_scratch", LoopKind.SEQUENTIAL, None, "writes tmp[j] in every iteration of i"),
    ("sequential.py", "reads_ahead", LoopKind.SEQUENTIAL, None, "reads a[i + 1] before the next iteration"),
    ("sequential.py", "appends", LoopKind.SEQUENTIAL, None, "calls out.append()"),
    ("sequential.py", "prints", LoopKind.SEQUENTIAL, None, "calls print()"),
    ("sequential.py", "running_sum", LoopKind.SEQUENTIAL, None, "uses s at line 67 besides accumulating it"),
    ("sequential.py", "find_last", LoopKind.SEQUENTIAL, None, "assigns found only in some iterations"),
    (
        "sequential.py",
        "row_prefix",
        LoopKind.SEQUENTIAL,
        None,
        "reads a[i, j - 1] written by the previous iteration of j",
    ),
    ("sequential.py", "difference_chain", LoopKind.SEQUENTIAL, None, "(s = s - x[i])"),
    ("sequential.py", "column_overwrite", LoopKind.SEQUENTIAL, None, "writes out[j] in every iteration of i"),
    ("sequential.py", "inner_overwrite", LoopKind.SEQUENTIAL, None, "writes out[i] in every iteration of j"),
    ("sequential.py", "diagonal_sum", LoopKind.SEQUENTIAL, None, "writes out[i + j]"),
    ("sequential.py", "whole_array", LoopKind.SEQUENTIAL, None, "uses out as a whole"),
    ("sequential.py", "random_fill", LoopKind.SEQUENTIAL, None, "calls rng.random()"),
    ("sequential.py", "shadowed_index", LoopKind.SEQUENTIAL, None, "reads out[i] and writes out[i]"),
    ("sequential.py", "bucket_append", LoopKind.SEQUENTIAL, None, "calls a method on buckets[keys[i]]"),
    (
        "sequential.py",
        "element_attribute_chain",
        LoopKind.SEQUENTIAL,
        None,
        "reads nodes[i - 1] written by the previous",
    ),
]


@pytest.mark.parametrize(("file", "function", "kind", "op", "reason"), FIXTURE_CASES)
def test_fixture_loops_are_classified(file, function, kind, op, reason):
    nest = only(FIXTURES / file, function)
    assert nest.kind is kind, nest.reason
    assert nest.reduction_op == op
    assert reason in nest.reason


def test_every_fixture_function_is_covered_by_a_case():
    covered = {(file, function) for file, function, *_ in FIXTURE_CASES}
    for file in ("maps.py", "reductions.py", "stencils.py", "sequential.py"):
        for function in nests(FIXTURES / file):
            if function != "sibling_loops":
                assert (file, function) in covered, (file, function)


def test_sibling_loops_are_separate_nests():
    first, second = nests(FIXTURES / "maps.py")["sibling_loops"]
    assert (first.vars, second.vars) == (("i",), ("j",))
    assert first.kind is LoopKind.MAP and second.kind is LoopKind.MAP
    assert first.line < first.end_line < second.line


# --------------------------------------------------------------------------- which loops are nests


def test_structure_module_loops_while_for_each_and_comprehensions():
    found = nests(FIXTURES / "structure.py")
    assert set(found) == {"inside_while", "inside_for_each", "imperfect"}  # no module loop, no comprehension
    assert only(FIXTURES / "structure.py", "inside_while").vars == ("i",)
    for_each = only(FIXTURES / "structure.py", "inside_for_each")
    assert for_each.vars == ("j",)
    assert for_each.kind is LoopKind.MAP
    imperfect = only(FIXTURES / "structure.py", "imperfect")
    assert imperfect.vars == ("i", "j", "k")
    assert imperfect.bounds == ("n", "1, m", "m")
    assert imperfect.kind is LoopKind.MAP, imperfect.reason
    assert imperfect.params == ("a", "b", "c", "out", "n", "m")


def test_names_params_and_lines():
    scan = scan_file(FIXTURES / "maps.py")
    method = next(n for n in scan.loops if n.function == "Scaler.apply")
    assert method.params == ("self", "a", "out", "n")
    inner = next(n for n in scan.loops if n.function == "outer.<locals>.inner")
    assert inner.params == ("b", "res", "m")
    assert [n.line for n in scan.loops] == sorted(n.line for n in scan.loops)
    chain = next(n for n in scan.loops if n.function == "nested_subscripts")
    assert [(w.array, w.index) for w in chain.writes] == [("out", ("i", "j"))]
    assert [(r.array, r.index) for r in chain.reads] == [("a", ("i", "j"))]  # one per line


def test_the_outer_range_arguments_are_not_accesses_of_the_loop():
    source = b"def f(n, out):\n    for i in range(len(out)):\n        out[i] = n\n"
    (nest,) = scan_python("f.py", source).loops
    assert nest.kind is LoopKind.MAP
    assert nest.bounds == ("len(out)",)
    assert nest.reads == ()


def test_nested_function_bodies_do_not_count_for_the_enclosing_loop():
    source = (
        b"def f(a, out, n):\n"
        b"    for i in range(n):\n"
        b"        def g():\n"
        b"            return out[0]\n"
        b"        out[i] = a[i]\n"
    )
    (nest,) = scan_python("f.py", source).loops
    assert nest.kind is LoopKind.MAP, nest.reason
    assert [(r.array, r.index) for r in nest.reads] == [("a", ("i",))]


# --------------------------------------------------------------------------- syntax errors

BROKEN = b"""def good(a, out, n):
    for i in range(n):
        out[i] = a[i]


def missing(a, n):
    for i in range(n):
        a[i] = (a[i] + 1
    return a


def later(x, n):
    s = 0
    for i in range(n):
        s += x[i]
    return s
"""


def test_syntax_errors_become_warnings_and_the_rest_is_still_scanned():
    scan = scan_python("broken.py", BROKEN)
    assert scan.warnings, "a parse error must give a warning"
    first = scan.warnings[0]
    assert first.line == 8 and first.column >= 1
    assert "syntax error" in first.message
    good = next(n for n in scan.loops if n.function == "good")
    assert good.kind is LoopKind.MAP
    broken = next(n for n in scan.loops if n.line == 7)
    assert broken.kind is LoopKind.SEQUENTIAL
    assert "does not parse" in broken.reason


def test_missing_token_warning_has_line_and_column():
    scan = scan_python("m.py", b"def f(a, n):\n    return max(a, n\n")
    assert any("missing" in w.message or "syntax error" in w.message for w in scan.warnings)
    assert all(w.line >= 1 and w.column >= 1 for w in scan.warnings)


def test_clean_file_has_no_warnings():
    assert scan_file(FIXTURES / "stencils.py").warnings == ()


# --------------------------------------------------------------------------- the JSON contract


def test_results_are_plain_json_with_the_public_field_names():
    data = to_jsonable(scan_file(SAMPLES / "loops_reduction.py"))
    text = json.dumps(data)  # no tree nodes or other objects survive
    assert json.loads(text) == data
    loop = data["loops"][0]
    for key in (
        "function",
        "line",
        "kind",
        "reason",
        "vars",
        "bounds",
        "reads",
        "writes",
        "params",
        "end_line",
    ):
        assert key in loop
    assert loop["function"] == "total"
    assert loop["kind"] == "reduction"
    assert loop["reduction_op"] == "+"
    assert loop["reads"] == [{"array": "x", "index": ["i"], "line": 18}]


def test_deeply_nested_expressions_give_an_unanalysed_sequential_nest_not_an_exception():
    terms = " + ".join(f"a[i + {k}]" for k in range(3000))
    source = f"def f(a, out, n):\n    for i in range(n):\n        out[i] = {terms}\n".encode()
    (nest,) = scan_python("deep.py", source).loops
    assert nest.kind is LoopKind.SEQUENTIAL
    assert "not analysed" in nest.reason
    assert nest.vars == ("i",)
