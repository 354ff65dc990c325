"""Spec inference through host helpers: launches inside (templated) host functions, resolved at
their call sites -- explicit and deduced template arguments, allocations in the helper or in the
caller, two levels of helpers, instantiation names (``axpby<float>``), and what stays unresolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.errors import PorterError
from porter.harness.spec import infer_spec, load_spec_file, spec_for, spec_snippet, split_instance
from porter.model import Role
from porter.scan.hostcalls import deduce_template_args, host_code, literal_type

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "cuda" / "spec_helpers"
SAMPLES = ROOT / "samples" / "cuda"


def _scan(path: Path):
    from porter.scan import scan_file

    return scan_file(str(path))


def _args(spec):
    return {a.name: a for a in spec.args}


def test_allocation_inside_the_helper_sizes_from_the_callers_argument():
    spec = infer_spec(_scan(FIXTURES / "alloc_in_helper.cu"), "scale")
    a = _args(spec)
    assert a["x"].shape == ("n",) and a["y"].shape == ("n",)  # helper's `count` is main's `n`
    assert a["x"].role is Role.IN and a["y"].role is Role.OUT
    assert a["s"].value == "2.5" and a["n"].value == "n"
    assert spec.grid == ("(n + 128 - 1) / 128",) and spec.block == ("128",)
    assert any("called from alloc_in_helper.cu:24 (main)" in n for n in spec.notes)
    assert "program size n = 50000" in spec.notes
    assert all(s["n"] <= 32768 for s in spec.sizes) and any(s["n"] % 2 for s in spec.sizes)


def test_allocation_in_main_follows_pointer_parameters_to_the_caller():
    spec = infer_spec(_scan(FIXTURES / "alloc_in_main.cu"), "saxpy")
    a = _args(spec)
    assert a["x"].shape == ("n",) and a["x"].role is Role.IN
    assert a["y"].role is Role.INOUT  # main copies into d_y before the call
    assert a["a"].value == "3.0" and a["n"].value == "n"
    assert spec.grid == ("(n + 256 - 1) / 256",)


@pytest.mark.parametrize("fixture", ["explicit_args.cu", "deduced_args.cu"])
@pytest.mark.parametrize(
    ("inst", "dtype", "symbol", "delta"),
    [("float", "float32", "n", "1.5"), ("double", "float64", "m", "-0.25")],
)
def test_template_helper_one_spec_per_instantiation(fixture, inst, dtype, symbol, delta):
    scan = _scan(FIXTURES / fixture)
    spec = infer_spec(scan, f"shift<{inst}>")
    assert spec.kernel == "shift" and spec.template_args == (inst,)
    a = _args(spec)
    assert {x.dtype for x in spec.args if x.name != "n"} == {dtype}
    assert a["in"].shape == (symbol,) and a["out"].shape == (symbol,)
    assert a["delta"].value == delta and a["n"].value == symbol
    assert a["out"].role is Role.OUT


def test_two_level_helpers_with_a_literal_size_and_dim3_parameter():
    spec = infer_spec(_scan(FIXTURES / "two_levels.cu"), "square<float>")
    assert spec.template_args == ("float",)
    a = _args(spec)
    assert a["data"].dtype == "float32" and a["data"].shape == ("elements",)
    assert a["data"].role is Role.INOUT  # cudaMemset before the launch
    assert spec.block == ("64",)  # `dim3 block(64)` in prepare, passed as `threads`
    assert spec.grid == ("(elements + 63) / 64",)
    assert "program size elements = 70000" in spec.notes
    assert any("(prepare)" in n for n in spec.notes) and any("(main)" in n for n in spec.notes)


def test_unresolved_size_keeps_the_error_and_the_snippet():
    with pytest.raises(PorterError) as err:
        infer_spec(_scan(FIXTURES / "unresolved.cu"), "fill")
    text = str(err.value)
    assert "unresolved.cu:16" in text.splitlines()[0]
    assert "no host value for read_size()" in text
    assert "[kernels.fill]" in text and "[[kernels.fill.args]]" in text


def test_templated_sample_axpby_float_and_double():
    scan = _scan(SAMPLES / "templated.cu")
    for inst, dtype, a, b in (("float", "float32", "2.0", "0.5"), ("double", "float64", "-1.25", "3.0")):
        spec = spec_for(SAMPLES / "templated.cu", scan, f"axpby<{inst}>")
        args = _args(spec)
        assert spec.template_args == (inst,) and spec.source == "inferred"
        assert args["x"].dtype == dtype and args["y"].dtype == dtype and args["a"].dtype == dtype
        assert args["a"].value == a and args["b"].value == b
        assert args["x"].shape == ("n",) and args["y"].role is Role.INOUT
        assert spec.sizes and spec.hidden_sizes
    # the non-type template kernel still works by instance name
    assert infer_spec(scan, "block_sum<128>").template_args == ("128",)


def test_an_instantiation_never_launched_is_a_clear_error():
    with pytest.raises(PorterError, match=r"launched as axpby<float>, axpby<double>") as err:
        infer_spec(_scan(SAMPLES / "templated.cu"), "axpby<int>")
    assert '[kernels."axpby<int>"]' in str(err.value)


def test_instance_snippet_round_trips_through_a_spec_file(tmp_path):
    src = tmp_path / "templated.cu"
    src.write_text((SAMPLES / "templated.cu").read_text())
    (tmp_path / "common.cuh").write_text((SAMPLES / "common.cuh").read_text())
    scan = _scan(SAMPLES / "templated.cu")
    spec = infer_spec(scan, "axpby<double>")
    (tmp_path / "templated.cu.porter.toml").write_text(spec_snippet(spec, name="axpby<double>"))
    loaded = load_spec_file(tmp_path / "templated.cu.porter.toml")["axpby<double>"]
    assert loaded.kernel == "axpby" and loaded.template_args == ("double",)
    assert loaded.args == spec.args and loaded.sizes == spec.sizes
    from_file = spec_for(src, scan, "axpby<double>")
    assert from_file.source == "spec-file" and from_file.template_args == ("double",)
    assert spec_for(src, scan, "axpby<float>").source == "inferred"  # no entry for it: inference


def test_split_instance_and_type_helpers():
    assert split_instance("axpby<float>") == ("axpby", ("float",))
    assert split_instance("k<unsigned int, 4>") == ("k", ("unsigned int", "4"))
    assert split_instance("saxpy") == ("saxpy", None)
    assert literal_type("2.0f") == "float" and literal_type("1e-6") == "double"
    assert literal_type("7u") == "unsigned int" and literal_type("(double)x") == "double"
    types = {"d_x": "float*", "v": "const double"}
    got = deduce_template_args(["T", "U"], ["const T*", "U"], ["d_x", "v"], types.get)
    assert got == {"T": "float", "U": "double"}


def test_host_code_reads_helpers_calls_and_declarations():
    hc = host_code((SAMPLES / "templated.cu").read_text())
    fn = hc.function("run_axpby")
    assert fn is not None and fn.template_params == ("T",)
    assert [p for p, _ in fn.params] == ["n", "a", "b", "tol"]
    calls = hc.calls_of("run_axpby")
    assert [(c.template_args, c.function) for c in calls] == [(("float",), "main"), (("double",), "main")]
    assert hc.declared_type("d_x", "run_axpby", 60) == "T*"
