"""Every registered backend and dialect holds to one contract (``porter.backends``), and a target that
lives outside porter -- the test-only "toy" of ``tests/fakes/toy/``, made known through the public
registration functions -- is held to it and picked up by a workflow like the built-in ones."""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest
from fakes import toy
from porter.backends import (
    Availability,
    Backend,
    BackendBase,
    Device,
    backend_names,
    dialect_names,
    dialect_of_suffix,
    fence_labels,
    get_backend,
    get_dialect,
    install_hints,
    register_backend,
    runners,
    runtime_prefixes,
    translation_targets,
)
from porter.backends.dialect import Dialect, DialectFacts, DialectSchemaError, load_facts, parse_facts

from porter.llm.prompting import dialect as prompt_dialect
from porter.model import Translation
from porter.source import load

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cuda" / "vector_add.cu"
BACKENDS = (*backend_names(), toy.NAME)  # the built-in ones (read at collection) and the toy
DIALECTS = (*dialect_names(), toy.NAME)
DIALECT_FILES = sorted((ROOT / "backends").glob("*/dialect.toml"))
# every method of the Backend protocol (it must not shrink to nothing unnoticed)
PROTOCOL_METHODS = tuple(n for n, v in vars(Backend).items() if callable(v) and not n.startswith("_"))


@pytest.fixture(autouse=True)
def toy_registered():
    toy.register()
    yield
    toy.unregister(toy.NAME)


# --------------------------------------------------------------------------- backends


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.integration
def test_backend_contract(name: str) -> None:
    be = get_backend(name)
    assert be.name == name
    assert {"compile", "load", "checkers", "missing_requirements", "set_symbol"} <= set(PROTOCOL_METHODS)
    for method in PROTOCOL_METHODS:
        assert callable(getattr(be, method)), f"{name} lacks {method}"
    assert isinstance(be.runs, tuple) and be.runs, f"{name} runs no dialect"
    assert set(be.runs) <= set(dialect_names()), f"{name} runs unknown dialects {be.runs}"
    assert isinstance(be.sets_symbols, bool) and isinstance(be.builds_without_device, bool)
    if be.sets_symbols:  # it says it takes module globals: it must implement set_symbol itself
        assert type(be).set_symbol is not BackendBase.set_symbol
    facts = be.dialect
    assert isinstance(facts, DialectFacts) and facts.name == name
    assert all(isinstance(a, str) for a in be.device_check_archs())
    assert all(isinstance(a, str) for a in be.compile_archs())
    hints = install_hints(name)
    assert hints == be.install_hints()
    assert set(hints) == {"compile", "run"} and all(hints.values()), f"{name}: install hints {hints}"
    assert be.missing_requirements(Device(backend=name, name="x", arch="x", kind="gpu"), []) == []


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.integration
def test_availability_is_well_formed(name: str) -> None:
    found = get_backend(name).availability()
    assert isinstance(found, Availability) and found.name == name
    assert isinstance(found.compile, bool) and isinstance(found.run, bool)
    assert isinstance(found.toolchain, str) and isinstance(found.hint, str)
    if found.run:
        assert found.devices, f"{name} says it runs here but lists no device"
    if not (found.compile and found.run):
        assert found.hint, f"{name} can neither compile nor run here and says nothing to install"
    for device in found.devices:
        assert isinstance(device, Device) and device.backend == name
        assert device.kind in ("gpu", "cpu", "emulator", "checker")
        checkers = get_backend(name).checkers(device)
        assert isinstance(checkers, tuple) and all(isinstance(c, str) and c for c in checkers)
        if device.kind == "checker":  # a checker device says which checker it is and how it runs
            assert checkers and get_backend(name).checker_wrapper(device, "/tmp/log")
        assert get_backend(name).missing_requirements(device, []) == []


@pytest.mark.integration
def test_sanitizer_is_declared_for_nvidia_gpus_only() -> None:
    gpu = Device(backend="cuda", name="NVIDIA H200", arch="sm_90", kind="gpu")
    assert get_backend("cuda").checkers(gpu) == ("compute-sanitizer",)
    # a HIP port on that GPU runs as CUDA: the same checkers as the original there (an H100 row had the original
    # failing racecheck and its port validated unchecked); none on an AMD GPU here
    on_cuda = Device(backend="hip", name="NVIDIA H200", arch="sm_90", kind="gpu", platform="hip-on-cuda")
    assert get_backend("hip").checkers(on_cuda) == ("compute-sanitizer",)
    amd = Device(backend="hip", name="AMD Instinct MI250X", arch="gfx90a", kind="gpu", platform="amd")
    assert get_backend("hip").checkers(amd) == ()
    assert (
        get_backend("cpu").checkers(Device(backend="cpu", name="emu", arch="x86_64", kind="emulator")) == ()
    )
    oclgrind = Device(backend="opencl", name="Oclgrind", arch="opencl-1.2", kind="checker")
    assert get_backend("opencl").checkers(oclgrind) == ("oclgrind",)
    assert get_backend("opencl").checker_wrapper(oclgrind, "/tmp/x.log")[0].endswith("oclgrind")


# --------------------------------------------------------------------------- dialects


@pytest.mark.parametrize("name", DIALECTS)
def test_dialect_contract(name: str) -> None:
    d = get_dialect(name)
    assert isinstance(d, Dialect) and d.name == name
    assert d.suffixes and all(s.startswith(".") and s == s.lower() for s in d.suffixes)
    assert all(dialect_of_suffix(s) == name for s in d.suffixes), "a suffix belongs to two dialects"
    facts = d.facts
    assert isinstance(facts, DialectFacts) and facts.name == name
    assert facts.file_extension == d.suffix
    assert runners(name), f"no backend runs {name}"
    assert isinstance(d.single_source, bool) and isinstance(d.templates, bool)
    spoken = prompt_dialect(name)  # a model can be asked for code in it, and told what to include
    assert spoken.name == d.prompt_name() and spoken.fence_label and isinstance(spoken.headers, tuple)
    # what it is told of the dialect lives in the dialect's folder, and the label asked for is accepted
    assert spoken.rules.strip() and spoken.rules == d.prompt_rules()
    assert spoken.fence_label in d.fence_labels() and spoken.fence_label in fence_labels()
    assert all(p and p.isidentifier() and p in runtime_prefixes() for p in d.runtime_prefixes())
    # translator options: each declares its values, the first the default; anything else is refused
    assert d.check_options({}) == {k: v[0] for k, v in d.translate_options.items()}
    for key, values in d.translate_options.items():
        assert values and d.check_options({key: values[-1]})[key] == values[-1]
        with pytest.raises(ValueError, match="must be one of"):
            d.check_options({key: "no-such-value"})
    with pytest.raises(ValueError, match="has no option"):
        d.check_options({"no_such_option": "x"})
    line = d.comment("ported by porter")  # one comment line, as the dialect's files write it
    assert line.endswith("\n") and line.count("\n") == 1 and "ported by porter" in line


def test_replies_are_screened_with_every_runtime_and_label() -> None:
    """The labels a reply's code block may carry and the runtime API prefixes that make a function host
    code are the dialects' together, each dialect listing its own in its dialect.toml."""
    assert {"cuda", "cu", "nvrtc", "hip", "hiprtc", "cl"} <= set(runtime_prefixes())
    assert {"cuda", "cu", "cpp", "c++", "c", "hip", "opencl", "cl"} <= fence_labels()


@pytest.mark.parametrize("name", DIALECTS)
def test_translator_present_or_declared_absent(name: str) -> None:
    d = get_dialect(name)
    if not d.translates:
        assert name not in translation_targets()
        with pytest.raises(NotImplementedError):
            d.translate(SAMPLE.read_text(), str(SAMPLE))
        return
    assert name in translation_targets()
    tr = d.translate(SAMPLE.read_text(), str(SAMPLE))
    assert isinstance(tr, Translation) and tr.target == name and tr.text
    assert [k.name for k in tr.kernels] == ["vector_add"]
    assert all(k.target == name and k.entry for k in tr.kernels)
    main, headers = d.translate_files(load(str(SAMPLE), "port"))
    assert main.text == tr.text and all(isinstance(h, Path) for h in headers)


# --------------------------------------------------------------------------- the dialect.toml schema


@pytest.mark.parametrize("path", DIALECT_FILES, ids=lambda p: p.parent.name)
def test_every_dialect_toml_loads_into_the_schema(path: Path) -> None:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    facts = load_facts(f"porter.backends.{path.parent.name}")
    assert facts.path == f"backends/{path.parent.name}/dialect.toml"
    for key, value in data.items():  # values unchanged (lists as tuples, tables as mappings)
        got = getattr(facts, key)
        assert json.dumps(got, default=lambda o: dict(o) if hasattr(o, "keys") else list(o)) == json.dumps(
            value
        ), key


def test_schema_rejects_unknown_missing_and_mistyped_keys() -> None:
    with pytest.raises(DialectSchemaError, match=r"x/dialect.toml: unknown key\(s\) 'warpsize'"):
        parse_facts({"name": "x", "language": "x", "warpsize": 32}, "x/dialect.toml")
    with pytest.raises(DialectSchemaError, match=r"x/dialect.toml: missing key\(s\) 'language'"):
        parse_facts({"name": "x"}, "x/dialect.toml")
    with pytest.raises(DialectSchemaError, match=r"x/dialect.toml: 'device_check_archs' must be a list"):
        parse_facts({"name": "x", "language": "x", "device_check_archs": "sm_90"}, "x/dialect.toml")
    with pytest.raises(DialectSchemaError, match=r"'lane_mask_bits' must be a int"):
        parse_facts({"name": "x", "language": "x", "lane_mask_bits": True}, "x/dialect.toml")
    assert {f.name for f in fields(DialectFacts)} >= {"name", "language", "install_hints"}


# --------------------------------------------------------------------------- the registry


def test_registry_refuses_a_second_registration_of_a_name() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_backend("cpu", toy.ToyBackend)


def test_the_toy_target_is_forgotten_again() -> None:
    toy.unregister(toy.NAME)
    assert toy.NAME not in backend_names() and toy.NAME not in dialect_names()
    with pytest.raises(KeyError):
        get_dialect(toy.NAME)
    toy.register()  # for the fixture's teardown


def test_runners_put_the_dialects_own_backend_first() -> None:
    assert runners("cuda") == ("cuda", "cpu")
    assert runners("hip") == ("hip", "cpu")
    assert runners("opencl") == ("opencl",)
    assert runners(toy.NAME) == (toy.NAME,)


# --------------------------------------------------------------------------- a workflow picks it up


@pytest.mark.integration
def test_port_translates_to_a_target_registered_from_tests(tmp_path: Path) -> None:
    from porter.workflows.options import OutputOptions
    from porter.workflows.port import parse_targets, port_file

    assert parse_targets("toy,hip") == ("toy", "hip")
    report = port_file(str(SAMPLE), ["toy"], output=OutputOptions(str(tmp_path)), translate_only=True)
    written = tmp_path / "vector_add.toy"
    assert report.outputs == {"toy": str(written)}
    assert written.read_text() == toy.BANNER.format(name=SAMPLE.name) + SAMPLE.read_text()
    (row,) = [r for k in report.kernels for r in k.variants]
    assert (row.target, row.status) == ("toy", "translated")


def test_a_file_is_in_the_dialect_whose_runtime_header_it_includes() -> None:
    from porter.backends import dialect_of_text

    # porter's HIP tree keeps the CUDA file names: the header it includes decides, not the suffix
    assert dialect_of_text(".cuh", "#include <hip/hip_runtime.h>\n__global__ void k() {}\n") == "hip"
    assert dialect_of_text(".cu", '  #  include "hip/hip_runtime.h"\n') == "hip"
    assert dialect_of_text(".cu", "// #include <hip/hip_runtime.h> in a comment line\n") == "cuda"
    assert dialect_of_text(".cu", "#include <cuda_runtime.h>\n") == "cuda"
    assert dialect_of_text(".cl", "__kernel void k() {}\n") == "opencl"
    assert dialect_of_text(".txt", "") is None
