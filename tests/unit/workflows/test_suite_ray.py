"""The Ray executor's pieces that need no cluster (issue #33 part 4): what a program's task asks for, which
folders travel to the node and how its arguments follow them, and the usage mistakes that stop before
anything runs.  The executor itself runs on a real cluster in tests/e2e/test_cli_port_suite_ray.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.workflows.suite_file import SuiteProgram
from porter.workflows.suite_ray import (
    _moved,
    _pack,
    _resign,
    _roots,
    _run,
    _scratch,
    _within,
    plan_stages,
    task_options,
)


def test_a_program_asks_for_a_gpu_only_when_its_toolchains_need_one() -> None:
    cpu = task_options(SuiteProgram("a", 1, ("/x",), toolchains=("cpu-runtime", "opencl")), "H100")
    assert cpu["num_cpus"] == 1 and cpu["num_gpus"] == 0 and "accelerator_type" not in cpu
    assert cpu["max_retries"] >= 1 and cpu["retry_exceptions"] is False
    assert task_options(SuiteProgram("b", 1, ("/x",)))["num_gpus"] == 0  # toolchains left to the node
    gpu = task_options(SuiteProgram("c", 1, ("/x",), toolchains=("cpu-runtime", "nvcc")), "H100")
    assert gpu["num_gpus"] == 1 and gpu["accelerator_type"] == "H100"
    assert "accelerator_type" not in task_options(SuiteProgram("d", 1, ("/x",), toolchains=("hipcc",)))
    # --per-gpu 4: four GPU programs share each GPU (Ray's fractional num_gpus); CPU-only ones ask for none
    assert task_options(SuiteProgram("c", 1, ("/x",), toolchains=("nvcc",)), None, 4)["num_gpus"] == 0.25
    assert task_options(SuiteProgram("a", 1, ("/x",), toolchains=("cpu-runtime",)), None, 4)["num_gpus"] == 0


def test_a_gpu_program_is_a_cpu_stage_then_a_gpu_stage() -> None:
    """Which toolchains go to which stage: the cpu stage gets those that need no GPU (and is left out
    when there are none), the gpu stage the program's own; a program that needs no GPU is one task."""
    both = SuiteProgram("a", 1, ("/x",), toolchains=("cpu-runtime", "nvcc", "opencl", "hip-on-cuda"))
    assert plan_stages(both) == [("cpu", ("cpu-runtime", "opencl")), ("gpu", None)]
    assert plan_stages(SuiteProgram("b", 1, ("/x",), toolchains=("nvcc", "hipcc"))) == [("gpu", None)]
    assert plan_stages(SuiteProgram("c", 1, ("/x",), toolchains=("cpu-runtime", "opencl"))) == [
        ("port", None)
    ]
    assert plan_stages(SuiteProgram("d", 1, ("/x",))) == [("port", None)]  # toolchains left to the node
    cpu = task_options(both, "H100", 4, "cpu")
    assert cpu["num_gpus"] == 0 and "accelerator_type" not in cpu and cpu["num_cpus"] == 1
    gpu = task_options(both, "H100", 4, "gpu")
    assert gpu["num_gpus"] == 0.25 and gpu["accelerator_type"] == "H100"
    assert cpu["max_retries"] == gpu["max_retries"] >= 1  # a lost stage is run again, not the program


def test_a_later_stage_works_where_the_earlier_one_did(tmp_path: Path) -> None:
    """The gpu stage's scratch folder is the cpu stage's path where it can be made here (the verdicts'
    keys name it), else a new one; and it trusts, signed again with this node's key, only the signed
    files the earlier node checked."""
    import json

    from porter import signing

    at = tmp_path / "porter-suite-p-abc"
    assert _scratch("p", str(at)) == at and at.is_dir()
    elsewhere = _scratch("p", str(at))  # taken: a folder of its own
    assert elsewhere != at and elsewhere.name.startswith("porter-suite-p-")
    elsewhere.rmdir()
    fresh = _scratch("p", str(tmp_path / "gone" / "porter-suite-p-x"))  # its parent is not here
    assert fresh.parent != tmp_path / "gone" and not (tmp_path / "gone").exists()
    fresh.rmdir()
    foreign = json.dumps({"schema": "x", "signature": "hmac-sha256:00:00"})
    for name in ("checked", "unchecked"):
        (at / name).mkdir()
        (at / name / "report.json").write_text(foreign)
    _resign(at, ["checked/report.json", "../report.json"])
    assert signing.json_problem(json.loads((at / "checked" / "report.json").read_text())) is None
    assert signing.json_problem(json.loads((at / "unchecked" / "report.json").read_text())) is not None


def test_the_folders_a_port_reads_travel_once_the_outer_one_carrying_the_inner(tmp_path: Path) -> None:
    (tmp_path / "corpus" / "prog" / "sub").mkdir(parents=True)
    (tmp_path / "corpus" / "common").mkdir()
    (tmp_path / "data").mkdir()
    main = tmp_path / "corpus" / "prog" / "main.cu"
    main.write_text("int main() {}\n")
    program = SuiteProgram(
        "p", 1, (str(main),),
        include=(str(tmp_path / "corpus" / "common"), str(tmp_path / "corpus" / "prog" / "sub")),
        data=(str(tmp_path / "data"),),
    )  # fmt: skip
    assert _roots(program) == sorted(
        [str(tmp_path / "data"), str(tmp_path / "corpus" / "prog"), str(tmp_path / "corpus" / "common")],
        key=len,
    )


def test_arguments_follow_their_folders_whole_path_components_only() -> None:
    moved = {"/w/a/prog": "/s/in/w/a/prog", "/a/prog": "/s/in/a/prog"}
    assert _moved("/w/a/prog", moved) == "/s/in/w/a/prog"
    assert _moved("/w/a/prog/x.cu", moved) == "/s/in/w/a/prog/x.cu"
    assert _moved("--run=/a/prog/in.bin 3", moved) == "--run=/s/in/a/prog/in.bin 3"
    assert _moved("/a/progx", moved) == "/a/progx"  # another folder
    assert _moved("/b/a/prog", moved) == "/b/a/prog"  # the tail of another path
    assert _moved("--fresh", moved) == "--fresh"


def test_a_folder_is_packed_under_its_own_absolute_path(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "k.cu").write_text("x")
    blob = _pack(tmp_path / "p", str(tmp_path / "p").lstrip("/"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        names = tar.getnames()
    assert str(tmp_path / "p" / "k.cu").lstrip("/") in names


def test_the_task_stops_a_port_past_its_timeout(tmp_path: Path) -> None:
    """The task's own loop (no Ray): SIGTERM at the timeout, SIGKILL after the grace, 'timed-out'."""
    argv = ["sh", "-c", "trap '' TERM; sleep 30"]
    code, why, seconds = _run(argv, {"PATH": "/usr/bin:/bin"}, tmp_path, tmp_path / "log", 0.2, 0.3)
    assert why == "timed-out" and code is not None and code < 0 and seconds < 10


def test_ray_options_go_with_the_ray_executor_and_a_suite(tmp_path: Path) -> None:
    from porter.cli import _port_suite

    suite = tmp_path / "suite.toml"
    suite.write_text("")
    with pytest.raises(UsageError, match="go with --executor ray"):
        _port_suite(suite, [], None, None, False, False, False, False, ("local", "h:1", (), None))
    with pytest.raises(UsageError, match="goes with --suite"):
        _port_suite(None, [], None, None, False, False, False, False, ("ray", None, (), None))
    with pytest.raises(UsageError, match="choose local or ray"):
        _port_suite(suite, [], None, None, False, False, False, False, ("dask", None, (), None))
    with pytest.raises(UsageError, match="--shared-dir"):
        _port_suite(suite, [], None, None, False, False, False, False, ("ray", None, ("/nonexistent",), None))


def test_a_cluster_that_does_not_answer_is_bad_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'porter-gpu[ray]')")
    from porter.workflows.suite_ray import connect

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(UsageError, match="needs the cluster's address"), connect(None):
        pass
    with pytest.raises(UsageError, match="no Ray head answers there"), connect("127.0.0.1:1"):
        pass


def test_a_link_out_of_the_folder_a_node_sends_back_is_left_out(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"{}"
        info = tarfile.TarInfo("p/report.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("p/key")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(tmp_path, filter=_within)
    assert (tmp_path / "p" / "report.json").read_bytes() == b"{}"
    assert not (tmp_path / "p" / "key").is_symlink()
