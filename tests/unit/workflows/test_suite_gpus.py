"""A suite on a machine of several GPUs (issue #34): each program that may use a GPU is pinned to the least
busy one (``CUDA_VISIBLE_DEVICES=<its UUID>``), at most ``--per-gpu`` at once when the user caps it, and the
summary says which GPU each ran on.  The GPUs come from nvidia-smi (a stand-in here lists two); the ports
are a stand-in for ``porter port`` that records the environment it was given and how long it ran."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from porter.backends.cuda.smi import gpu_slots

from porter.workflows.suite import SuiteOptions, run_suite
from porter.workflows.suite_file import load_suite

UUIDS = ("GPU-11111111-aaaa", "GPU-22222222-bbbb")
SMI = f"""#!/bin/sh
case "$*" in
  *--query-gpu=index,uuid,pci.bus_id,name*)
    printf '0, {UUIDS[0]}, 00000000:1B:00.0, NVIDIA H200\\n1, {UUIDS[1]}, 00000000:43:00.0, NVIDIA H200\\n' ;;
  *) exit 9 ;;
esac
"""
# what the stand-in port does: note its GPU and its start and end, take a while, leave no report
PORT = """import json, os, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
began = time.time()
time.sleep(0.6)
with open(os.path.join(out, "ran.json"), "w") as fh:
    json.dump({"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "began": began, "ended": time.time(),
               "spares": os.environ.get("PORTER_SPARES"), "blas": os.environ.get("OPENBLAS_NUM_THREADS")}, fh)
"""


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text(SMI, encoding="utf-8")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (tmp_path / "port.py").write_text(PORT, encoding="utf-8")
    return tmp_path


def _suite(folder: Path, toolchains: dict[str, str]) -> Path:
    (folder / "src").mkdir(exist_ok=True)
    text = 'root = "src"\n'
    for name, chains in toolchains.items():
        text += f'\n[programs.{name}]\npath = "."\nruns = [""]\n' + (
            f'toolchains = "{chains}"\n' if chains else ""
        )
    (folder / "suite.toml").write_text(text, encoding="utf-8")
    return folder / "suite.toml"


def _ran(out: Path, name: str) -> dict[str, object]:
    return json.loads((out / name / "ran.json").read_text())  # type: ignore[no-any-return]


def test_nvidia_smi_lists_the_gpus_this_process_may_use(
    two_gpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slots = gpu_slots()
    assert [(s.uid, s.name, dict(s.env)) for s in slots] == [
        ("pci:0000:1b:00", "NVIDIA H200", {"CUDA_VISIBLE_DEVICES": UUIDS[0]}),
        ("pci:0000:43:00", "NVIDIA H200", {"CUDA_VISIBLE_DEVICES": UUIDS[1]}),
    ]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # this process was given the second GPU only
    assert [s.uid for s in gpu_slots()] == ["pci:0000:43:00"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1111")  # a UUID prefix, as CUDA takes it
    assert [s.uid for s in gpu_slots()] == ["pci:0000:1b:00"]


def test_programs_are_spread_over_the_gpus_and_the_cpu_only_one_is_pinned_to_none(two_gpus: Path) -> None:
    suite = load_suite(_suite(two_gpus, {"a": "nvcc", "b": "opencl", "c": "", "d": "cpu-runtime"}))
    out = two_gpus / "out"
    report = run_suite(suite, SuiteOptions(out, jobs=4, command=(sys.executable, str(two_gpus / "port.py"))))
    gpus = {name: _ran(out, name)["gpu"] for name in "abcd"}
    assert gpus["a"] == UUIDS[0] and gpus["b"] == UUIDS[1] and gpus["c"] == UUIDS[0]  # the least busy first
    assert gpus["d"] is None  # the CPU runtime uses no GPU: not pinned
    rows = {p.name: p for p in report.programs}
    assert rows["a"].gpu == "NVIDIA H200 (pci:0000:1b:00)" and rows["d"].gpu == ""
    assert (
        json.loads((out / "summary.json").read_text())["programs"][1]["gpu"] == "NVIDIA H200 (pci:0000:43:00)"
    )


def test_per_gpu_caps_the_programs_on_one_gpu_and_the_rest_wait(two_gpus: Path) -> None:
    suite = load_suite(_suite(two_gpus, {"a": "nvcc", "b": "nvcc", "c": "nvcc", "d": "cpu-runtime"}))
    out = two_gpus / "out"
    command = (sys.executable, str(two_gpus / "port.py"))
    run_suite(suite, SuiteOptions(out, jobs=4, command=command, per_gpu=1))
    ran = {name: _ran(out, name) for name in "abcd"}
    assert {ran["a"]["gpu"], ran["b"]["gpu"]} == set(UUIDS)
    first_end = min(float(ran[n]["ended"]) for n in "ab")  # type: ignore[arg-type]
    assert float(ran["c"]["began"]) >= first_end - 0.05  # type: ignore[arg-type]  # waited for a free GPU
    assert float(ran["d"]["began"]) < first_end  # type: ignore[arg-type]  # no GPU: it did not wait


def test_programs_side_by_side_start_no_spare_children_unless_the_user_says(
    two_gpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Programs sharing the machine's cores (-j > 1) get PORTER_SPARES=0: a spare warmed ahead of its job only
    pays where cores would idle; one program at a time keeps porter's default, and a user's value wins."""
    monkeypatch.delenv("PORTER_SPARES", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    suite = load_suite(_suite(two_gpus, {"a": "cpu-runtime", "b": "cpu-runtime"}))
    command = (sys.executable, str(two_gpus / "port.py"))
    run_suite(suite, SuiteOptions(two_gpus / "side", jobs=2, command=command))
    assert [_ran(two_gpus / "side", n)["spares"] for n in "ab"] == ["0", "0"]
    run_suite(suite, SuiteOptions(two_gpus / "alone", jobs=1, command=command))
    assert [_ran(two_gpus / "alone", n)["spares"] for n in "ab"] == [None, None]
    monkeypatch.setenv("PORTER_SPARES", "2")
    run_suite(suite, SuiteOptions(two_gpus / "asked", jobs=2, command=command))
    assert [_ran(two_gpus / "asked", n)["spares"] for n in "ab"] == ["2", "2"]


def test_a_suites_porter_processes_get_one_blas_thread_unless_the_user_chose(
    two_gpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenBLAS's idle threads spin: a thread per core in each program's porter process is pure cost."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    suite = load_suite(_suite(two_gpus, {"a": "cpu-runtime", "b": "cpu-runtime"}))
    command = (sys.executable, str(two_gpus / "port.py"))
    for jobs in (1, 2):
        run_suite(suite, SuiteOptions(two_gpus / f"j{jobs}", jobs=jobs, command=command))
        assert [_ran(two_gpus / f"j{jobs}", n)["blas"] for n in "ab"] == ["1", "1"]
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    run_suite(suite, SuiteOptions(two_gpus / "mine", jobs=2, command=command))
    assert [_ran(two_gpus / "mine", n)["blas"] for n in "ab"] == ["8", "8"]
