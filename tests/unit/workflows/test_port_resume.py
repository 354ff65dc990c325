"""porter port: report.json written row by row and atomically, a re-run that keeps what still holds
(and only that), --fresh, and the output folder checks -- on the CPU emulator, in process."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from porter.backends import get_backend

from porter import plan as planning
from porter.errors import UsageError
from porter.harness.validate import ValidateOptions
from porter.results import PortReport, VariantRow, file_digest
from porter.workflows import port as port_mod
from porter.workflows import resume
from porter.workflows.options import OutputOptions, RunOptions
from porter.workflows.port import port_file
from porter.workflows.resume import Ledger

KERNELS = ("scale", "shift", "square")
SOURCE = """// three kernels for the resume tests
__global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

__global__ void shift(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}

__global__ void square(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
"""
SPEC = "".join(
    f"""[kernels.{k}]
grid = ["(n + 63) / 64"]
block = ["64"]
sizes = [{{ n = 100 }}]
hidden_sizes = [{{ n = 33 }}]
args = [
  {{ name = "x", role = "in", dtype = "float32", shape = ["n"] }},
  {{ name = "y", role = "out", dtype = "float32", shape = ["n"] }},
  {{ name = "n", role = "scalar", dtype = "int32", value = "n" }},
]

"""
    for k in KERNELS
)
OPTS = ValidateOptions(trials=1)


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume")


@pytest.fixture(scope="module")
def binaries(module_dir: Path) -> Path:
    return module_dir / "binaries"  # compiled kernels shared by this module's tests


@pytest.fixture
def emulator_only(monkeypatch: pytest.MonkeyPatch, binaries: Path) -> None:
    """HIP variants validated on the CPU emulator only (no compile-only archs): seconds per run."""
    try:
        cpu = [d for d in get_backend("cpu").devices() if d.kind != "checker"]
    except Exception:  # noqa: BLE001
        cpu = []
    if not cpu:
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    monkeypatch.setenv("PORTER_CACHE_DIR", str(binaries))
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)
    monkeypatch.setattr(planning, "compile_archs", lambda target: [])
    monkeypatch.setattr(planning, "run_devices", lambda target: list(cpu))


@pytest.fixture
def program(module_dir: Path) -> Path:
    """The same paths in every test (so the compile cache serves them all), with fresh contents."""
    folder = module_dir / "src"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "prog.cu").write_text(SOURCE)
    (folder / "prog.cu.porter.toml").write_text(SPEC)
    return folder / "prog.cu"


def run(program: Path, *, stop_at: str | None = None, seen: list[str] | None = None, **kw: Any):
    """port_file on `program` (HIP); `stop_at`: KeyboardInterrupt when progress says it validates that kernel."""
    log = seen if seen is not None else []

    def progress(msg: str) -> None:
        log.append(msg)
        if stop_at is not None and msg.startswith(f"{stop_at}: validating"):
            raise KeyboardInterrupt

    options = RunOptions(validate=kw.pop("options", OPTS))
    output = OutputOptions(kw.pop("out_dir", None), fresh=kw.pop("fresh", False))
    return port_file(str(program), ["hip"], run=options, output=output, progress=progress, **kw)


def saved(program: Path) -> dict[str, Any]:
    return json.loads((program.parent / "prog.ported" / "report.json").read_text())


def rows(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {k["name"]: k["variants"] for k in doc["kernels"]}


def validated(doc: dict[str, Any]) -> set[str]:
    return {name for name, vs in rows(doc).items() if vs and all(v["status"] == "validated" for v in vs)}


def resign(report: Path, doc: dict[str, Any]) -> None:
    """`doc` written as porter writes report.json (signed): the rows' own keys and statuses are what
    these tests vary; a report edited by hand is not reused at all (tests/unit/test_signing.py)."""
    from porter.workflows.resume import write_atomic

    write_atomic(report, json.dumps(doc))


def redone(seen: list[str]) -> set[str]:
    return {m.split(":", 1)[0] for m in seen if ": validating " in m}


# --------------------------------------------------------------------------- incremental and atomic


@pytest.mark.integration
def test_report_grows_row_by_row_and_is_always_whole(program: Path, emulator_only: None) -> None:
    counts: list[int] = []

    def progress(msg: str) -> None:
        report = program.parent / "prog.ported" / "report.json"
        if report.exists():
            counts.append(sum(len(v) for v in rows(json.loads(report.read_text())).values()))

    report = port_file(str(program), ["hip"], run=RunOptions(validate=OPTS), progress=progress)
    assert report.exit_code == 0 and {r.status for r in report.rows()} == {"validated"}
    assert counts == sorted(counts) and counts[-1] == 2  # each verdict was on disk before the next began
    doc = saved(program)
    assert doc["complete"] is True and doc["schema"] == "porter-port-report/1"
    assert validated(doc) == set(KERNELS)
    # each row carries its key and file hash in its own object: the next run's ledger finds it by key
    ledger = Ledger.of(program.parent / "prog.ported", "port")
    for v in (v for vs in rows(doc).values() for v in vs):
        assert v["key"] and v["file_sha"] == file_digest(v["path"]) and ledger.get(v["key"]) == v
    assert not any("resume" in k for k in doc["kernels"])  # (no list of keys beside the rows)
    leftovers = [p.name for p in (program.parent / "prog.ported").iterdir() if p.name.endswith(".tmp")]
    assert not leftovers


# --------------------------------------------------------------------------- resuming


def test_resume_finds_a_row_by_its_key_in_the_ledger(tmp_path: Path) -> None:
    """The single-file port asks the ledger (resume.Ledger) of the earlier report for the key of what it
    would make now: a row of the new layout (key and file hash in the row's own object) is found by that
    key wherever it sits -- here under another kernel's name -- and is kept only while its file is
    unchanged; a key kept beside the rows (the old parallel "resume" list) finds nothing."""
    made = tmp_path / "prog.hip"
    made.write_text("// the translation\n")
    inputs = port_mod._Inputs({("scale", "hip"): "group"}, {("hip", "cpu:emu"): "g++ 12"}, frozenset())
    key = inputs.key("scale", VariantRow("hip", "", "", "cpu:emu"))
    assert key == resume.key_of("port-row", "group", "hip", "cpu:emu", "translate", "g++ 12")
    stored = {"target": "hip", "path": str(made), "status": "validated", "device": "cpu:emu",
              "max_rel_err": 0.0, "trials": 1, "reason": "", "key": key, "file_sha": file_digest(made)}  # fmt: skip
    doc = {"kernels": [{"name": "renamed", "variants": [stored]}]}

    def recorder(earlier: dict[str, Any]) -> Any:
        report = PortReport(str(tmp_path / "prog.cu"), str(tmp_path), ("hip",), False)
        return port_mod._Recorder(report, tmp_path, set(), inputs, Ledger(earlier))

    found = recorder(doc)
    kept = found.kept("scale", "hip", ["cpu:emu"], "translate")
    assert [(r.key, r.status, r.resumed) for r in kept] == [(key, "validated", True)]
    assert found.pending == {"scale": kept}  # shown in report.json until scale/hip is done again
    assert not found.kept("scale", "hip", ["cpu:emu"], "llm:anthropic:x")  # another key: not this row

    old_layout = {"kernels": [{"name": "scale", "variants": [{k: v for k, v in stored.items() if k not in
                  ("key", "file_sha")}], "resume": [{"key": key, "file_sha": stored["file_sha"]}]}]}  # fmt: skip
    assert not recorder(old_layout).kept("scale", "hip", ["cpu:emu"], "translate")
    made.write_text("// edited since\n")
    assert not recorder(doc).kept("scale", "hip", ["cpu:emu"], "translate")


@pytest.mark.integration
def test_rerun_keeps_what_still_holds_and_redoes_nothing(program: Path, emulator_only: None) -> None:
    first = run(program)
    seen: list[str] = []
    second = run(program, seen=seen)
    assert not redone(seen) and any("kept" in m for m in seen)
    assert [r.status for r in second.rows()] == [r.status for r in first.rows()] == ["validated"] * 3
    assert all(r.resumed for r in second.rows())
    doc = saved(program)
    assert doc["complete"] is True
    assert all(v["resumed"] is True for vs in rows(doc).values() for v in vs)
    errors = [v["max_rel_err"] for vs in rows(doc).values() for v in vs]
    assert errors == [r.max_rel_err for r in first.rows()]


@pytest.mark.integration
def test_interrupted_runs_lose_nothing_and_the_next_one_finishes(program: Path, emulator_only: None) -> None:
    """Run 1 is interrupted after `scale`; run 2 resumes, validates `shift` and is interrupted too: its
    report still has `scale`.  Run 3 only does `square`."""
    with pytest.raises(KeyboardInterrupt):
        run(program, stop_at="shift")
    doc = saved(program)
    assert doc["complete"] is False and validated(doc) == {"scale"}

    seen: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run(program, stop_at="square", seen=seen)
    assert redone(seen) == {"shift", "square"}  # scale kept, not redone
    doc = saved(program)
    assert doc["complete"] is False and validated(doc) == {"scale", "shift"}
    assert rows(doc)["scale"][0]["resumed"] is True and "resumed" not in rows(doc)["shift"][0]

    seen.clear()
    report = run(program, seen=seen)
    assert redone(seen) == {"square"}
    assert report.exit_code == 0 and validated(saved(program)) == set(KERNELS)
    assert [r.resumed for r in report.rows()] == [True, True, False]


@pytest.mark.integration
def test_a_rerun_failing_midway_keeps_the_earlier_rows(
    program: Path, emulator_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue: a re-run that had things to redo rewrote report.json empty at its start, so failing
    (or being interrupted) part-way left almost nothing.  Now every earlier row that still holds stays,
    as it was, until it is done again."""
    run(program)
    report = program.parent / "prog.ported" / "report.json"
    doc = json.loads(report.read_text())
    for k in doc["kernels"][:2]:  # scale and shift failed last time (keys intact): both are redone
        k["variants"][0].update(status="failed", reason="flaky last time")
    resign(report, doc)
    real_validate = port_mod.validate

    def crash_on_shift(variant, spec, reference, devices, options):  # noqa: ANN001
        if spec.kernel == "shift":
            raise RuntimeError("the machine went away")
        return real_validate(variant, spec, reference, devices, options)

    monkeypatch.setattr(port_mod, "validate", crash_on_shift)
    seen: list[str] = []
    with pytest.raises(RuntimeError):
        run(program, seen=seen)
    assert redone(seen) == {"scale", "shift"}
    after = rows(saved(program))
    assert saved(program)["complete"] is False and list(after) == list(KERNELS)
    assert after["scale"][0]["status"] == "validated" and "resumed" not in after["scale"][0]
    assert after["shift"][0]["reason"] == "flaky last time" and after["shift"][0]["resumed"] is True
    assert after["square"][0]["status"] == "validated" and after["square"][0]["resumed"] is True


@pytest.mark.parametrize("change", ["source", "spec", "options", "toolchain", "porter code"])
@pytest.mark.integration
def test_a_changed_input_is_never_served_a_stale_verdict(
    program: Path, emulator_only: None, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    run(program)
    options = OPTS
    if change == "source":  # one kernel's text changes: the whole unit is another input
        program.write_text(SOURCE.replace("y[i] = x[i] + 1.0f;", "y[i] = 1.0f + x[i];"))
    elif change == "spec":
        program.with_name("prog.cu.porter.toml").write_text(SPEC.replace("n = 33", "n = 35"))
    elif change == "options":
        options = ValidateOptions(trials=1, seed=7)
    elif change == "toolchain":
        real = port_mod.toolchain_of
        monkeypatch.setattr(port_mod, "toolchain_of", lambda *a: f"{real(*a)} (upgraded)")
    else:
        monkeypatch.setattr(resume, "code_fingerprint", lambda: "another porter")  # in every key_of
    seen: list[str] = []
    with pytest.raises(KeyboardInterrupt):  # stopped as the first kernel starts: it was not kept
        run(program, seen=seen, options=options, stop_at="scale")
    assert redone(seen) == {"scale"} and not any("kept" in m for m in seen)
    doc = saved(program)  # nor is any earlier row still in the report: none holds for these inputs
    assert doc["complete"] is False and not any(rows(doc).values())


@pytest.mark.integration
def test_a_previous_row_without_its_key_or_with_a_forged_one_is_redone(
    program: Path, emulator_only: None
) -> None:
    run(program)
    report = program.parent / "prog.ported" / "report.json"
    doc = json.loads(report.read_text())
    doc["kernels"][0]["variants"][0]["key"] = "0" * 64  # scale: forged
    del doc["kernels"][1]["variants"][0]["key"]  # shift: an older report without keys
    resign(report, doc)
    seen: list[str] = []
    run(program, seen=seen)
    assert redone(seen) == {"scale", "shift"}


@pytest.mark.integration
def test_failed_rows_are_redone(program: Path, emulator_only: None) -> None:
    run(program)
    report = program.parent / "prog.ported" / "report.json"
    doc = json.loads(report.read_text())
    doc["kernels"][2]["variants"][0]["status"] = "failed"
    resign(report, doc)
    seen: list[str] = []
    result = run(program, seen=seen)
    assert redone(seen) == {"square"} and result.exit_code == 0


@pytest.mark.integration
def test_fresh_redoes_everything(program: Path, emulator_only: None) -> None:
    run(program)
    seen: list[str] = []
    report = run(program, seen=seen, fresh=True)
    assert redone(seen) == set(KERNELS)
    assert not any(r.resumed for r in report.rows())
    assert not any("resumed" in v for vs in rows(saved(program)).values() for v in vs)


# --------------------------------------------------------------------------- --out


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", [".", "sub"])
def test_out_in_the_source_folder_with_the_users_files_is_refused(program: Path, where: str) -> None:
    folder = program.parent / where
    folder.mkdir(exist_ok=True)
    (folder / "notes.txt").write_text("mine\n")
    (folder / "prog.hip").write_text("my own HIP port, not porter's\n")
    before = snapshot(program.parent)
    with pytest.raises(UsageError, match="overwrite") as err:
        port_file(str(program), ["hip"], output=OutputOptions(str(folder)), translate_only=True)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert snapshot(program.parent) == before


def test_out_in_the_source_folder_empty_or_porters_own_is_fine(program: Path) -> None:
    empty = program.parent / "ported"
    empty.mkdir()
    assert port_file(str(program), ["hip"], output=OutputOptions(str(empty)), translate_only=True).complete
    again = port_file(str(program), ["hip"], output=OutputOptions(str(empty)), translate_only=True)  # its own
    assert again.complete and (empty / "prog.hip").is_file()
    other = program.parent / "elsewhere"  # an optimize output is porter's too
    other.mkdir()
    (other / "report.json").write_text(json.dumps({"schema": "porter-optimize-report/1"}))
    assert port_file(str(program), ["hip"], output=OutputOptions(str(other)), translate_only=True).complete


def test_out_that_is_a_file_or_under_one_is_refused_before_any_work(program: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out in (blocker, blocker / "sub"):
        with pytest.raises(UsageError) as err:
            port_file(str(program), ["hip"], output=OutputOptions(str(out)), translate_only=True)
        assert err.value.exit_code == 2 and "not a folder" in str(err.value)
    assert blocker.read_text() == "x"


def test_unwritable_out_is_refused(program: Path, tmp_path: Path) -> None:
    # /proc takes no new folders, not even root's (CI runs as root, where permission bits do not hold)
    with pytest.raises(UsageError, match="cannot be created") as err:
        port_file(str(program), ["hip"], output=OutputOptions("/proc/porter-out-test"), translate_only=True)
    assert err.value.exit_code == 2
    if os.geteuid() == 0:
        return  # permission bits bind everyone else
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for out in (locked, locked / "new"):
            with pytest.raises(UsageError, match="writable") as err:
                port_file(str(program), ["hip"], output=OutputOptions(str(out)), translate_only=True)
            assert err.value.exit_code == 2
    finally:
        locked.chmod(0o700)
