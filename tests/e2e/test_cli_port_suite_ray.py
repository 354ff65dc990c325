"""`porter port --suite --executor ray` (issue #33 part 4) on a real Ray cluster of this machine: a head
node (2 CPUs) and worker nodes joining it, each with raylet processes of its own and its own temp folder
(its "local disk"), started with ray.cluster_utils (which keeps their process ids, so teardown stops
exactly them).  The three fixture programs of test_cli_port_suite.py are ported through it and the summary
compared with the local run's; then a worker node's raylet is killed mid-suite and the suite still ends
with the same summary, the lost program run again on the head.  A program whose toolchains need a GPU
runs its cpu stage on a CPU task and its gpu stage on a node that declares a GPU (Ray takes the
declaration; no GPU is used), resuming what the cpu stage did.

The cluster's address is the machine's own: Ray rewrites a loopback address (127.0.0.1) to it before it
connects, so a cluster bound to 127.0.0.1 alone cannot be joined by a driver here."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("emulator")]

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'porter-gpu[ray]')")

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"
THREE = ("warp_sum", "unity_types", "included_kernel_unit")
# the head declares a node dead after 3 missed checks 1 s apart (Ray's default: 5 of 3 s)
FAST_DEATH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


def _suite(folder: Path) -> Path:
    """The local suite test's suite: the three fixture programs, each run once on the CPU runtime."""
    text = f'root = "{PROGRAMS}"\n\n[defaults]\nruns = [""]\ntoolchains = "cpu-runtime,opencl"\n'
    for name in THREE:
        text += f'\n[programs.{name}]\npath = "{name}"\n'
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(text, encoding="utf-8")
    return folder / "suite.toml"


def porter(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _doc(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-4000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _comparable(doc: dict[str, Any], out: Path) -> dict[str, Any]:
    """A summary apart from timings and device names: its seconds, stage seconds, run-time ratios (per
    device) and Ray nodes dropped, its output folder named OUT."""
    doc = json.loads(json.dumps(doc).replace(str(out), "OUT"))
    doc.pop("seconds")
    assert set(doc.pop("stages")) >= {"plan", "translate", "build and run", "replay"}
    for p in doc["programs"]:
        p.pop("seconds")
        p.pop("stages")
        p.pop("ran_on")
        for row in p["targets"].values():
            row.pop("time_ratio")
    return doc


def _survivors(needle: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmd and state != "Z":
            found.append(cmd)
    return found


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _suite(tmp_path_factory.mktemp("suite"))


@pytest.fixture(scope="module")
def local(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The suite ported here, two at a time (the executor the Ray runs are compared with)."""
    out = tmp_path_factory.mktemp("local") / "out"
    proc = porter("port", "--suite", str(suite), "--out", str(out), "-j", "2", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-4000:]
    doc = _doc(proc)
    assert doc["complete"] and [p["status"] for p in doc["programs"]] == ["done"] * 3
    return doc, out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A head node of 2 CPUs; each test adds its worker node.  Shut down (every node's processes, by
    their ids) whatever the tests did."""
    from ray.cluster_utils import Cluster

    head_tmp = tmp_path_factory.mktemp("head")
    started = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "env_vars": {"TMPDIR": str(head_tmp)},
            "_system_config": FAST_DEATH,
        },
        shutdown_at_exit=True,
    )
    try:
        yield started
    finally:
        started.shutdown()


def _add_node(cluster: Any, tmp: Path, name: str) -> Any:
    """A worker node of 1 CPU whose tasks' temp folder is `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    node = cluster.add_node(num_cpus=1, env_vars={"TMPDIR": str(tmp)}, resources={name: 1})
    cluster.wait_for_nodes()
    return node


def _ran_on(out: Path, name: str) -> str:
    """The node id (its first 12 digits) the program's log says its port came back from."""
    first = (out / ".suite" / f"{name}.log").read_text(errors="replace").splitlines()[0]
    assert first.startswith("porter: ran on Ray node "), first
    return first.rsplit("(", 1)[1].rstrip(")")


def _on_ray(
    cluster: Any, suite: Path, out: Path, expected: dict[str, Any], local_out: Path
) -> tuple[dict[str, Any], float]:
    """The suite run on the cluster two at a time into `out` (its summary, its seconds), checked to end as
    the local run did and to say what the local run (`expected`, into `local_out`) said."""
    start = time.monotonic()
    args = ["--executor", "ray", "--ray-address", cluster.address, "-j", "2", "--json"]
    proc = porter("port", "--suite", str(suite), "--out", str(out), *args)
    took = time.monotonic() - start
    doc = _doc(proc)
    assert proc.returncode == expected["exit_code"], proc.stderr[-4000:]
    assert _comparable(doc, out) == _comparable(expected, local_out)
    return doc, took


def test_a_suite_on_ray_is_the_local_suite(
    cluster: Any, suite: Path, local: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    """Two at a time over the head and a worker node, inputs and outputs by value: the same summary as
    the local run's, each output folder written by the driver with reports it trusts (a local re-run
    resumes every program from them)."""
    node = _add_node(cluster, tmp_path / "node2", "node2")
    try:
        out = tmp_path / "out"
        expected, local_out = local
        doc, took = _on_ray(cluster, suite, out, expected, local_out)
        for name in THREE:
            report = json.loads((out / name / "report.json").read_text())
            assert (
                report["complete"]
                and report["kernel_counts"]
                == json.loads((local_out / name / "report.json").read_text())["kernel_counts"]
            )
        nodes = {_ran_on(out, name) for name in THREE}
        assert node.node_id[:12] in nodes and len(nodes) == 2, nodes  # spread over both nodes
        assert not list((tmp_path / "node2").glob("porter-suite-*-*")), "the node's scratch folder is left"
        again = _doc(porter("port", "--suite", str(suite), "--out", str(out), "--json"))
        assert [p["status"] for p in again["programs"]] == ["resumed"] * 3
        print(f"ray suite: {took:.1f} s; local suite: {expected['seconds']:.1f} s")
    finally:
        cluster.remove_node(node, allow_graceful=False)


def test_a_node_lost_mid_suite_is_run_again_elsewhere(
    cluster: Any, suite: Path, local: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    """The worker node's raylet killed while a port runs there: Ray runs that task again on the head;
    the suite ends with the local run's summary, and nothing of the lost port runs on.  The inputs are
    read in place (--shared-dir)."""
    node_tmp = tmp_path / "node3"
    node = _add_node(cluster, node_tmp, "node3")
    out = tmp_path / "out"
    args = ["--executor", "ray", "--ray-address", cluster.address, "--shared-dir", str(PROGRAMS)]
    driver = subprocess.Popen(
        [sys.executable, "-m", "porter", "port", "--suite", str(suite), "--out", str(out), "-j", "2", *args,
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    killed = ""
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            scratch = [p for p in node_tmp.glob("porter-suite-*-*") if (p / "out").is_dir()]
            if scratch:
                time.sleep(3)  # well into its port
                killed = scratch[0].name.removeprefix("porter-suite-").rsplit("-", 1)[0]
                node.kill_raylet()
                break
            time.sleep(0.2)
        assert killed, "no port ran on the worker node"
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
        cluster.remove_node(node, allow_graceful=False)
    doc = json.loads(stdout)
    assert "Traceback" not in stderr, stderr[-4000:]
    expected, local_out = local
    assert driver.returncode == expected["exit_code"], stderr[-4000:]
    assert _comparable(doc, out) == _comparable(expected, local_out)
    assert _ran_on(out, killed) != node.node_id[:12]  # its port came back from the head
    assert not _survivors(str(node_tmp)), "the lost node's port runs on"


def test_a_gpu_program_runs_its_cpu_stage_apart_from_its_gpu_stage(cluster: Any, tmp_path: Path) -> None:
    """A program whose toolchains name nvcc: its cpu stage (the CPU toolchains' builds) on a CPU task,
    its gpu stage on the node that declares a GPU, resuming the cpu stage's verdicts from its folder --
    though that node has a state key of its own (its own XDG_CONFIG_HOME) -- and the summary is the local
    run's."""
    folder = tmp_path / "suite"
    folder.mkdir()
    suite = folder / "suite.toml"
    suite.write_text(
        f'root = "{PROGRAMS}"\n\n[programs.warp_sum]\npath = "warp_sum"\nruns = [""]\n'
        'toolchains = "cpu-runtime,opencl,nvcc"\n',
        encoding="utf-8",
    )
    local_out = tmp_path / "local"
    expected = _doc(porter("port", "--suite", str(suite), "--out", str(local_out), "-j", "2", "--json"))
    assert [p["ran_on"] for p in expected["programs"]] == [[]]
    (tmp_path / "gpu-node").mkdir()
    node = cluster.add_node(
        num_cpus=1, num_gpus=1, resources={"gpu-node": 1},
        env_vars={"TMPDIR": str(tmp_path / "gpu-node"), "XDG_CONFIG_HOME": str(tmp_path / "gpu-node-config")},
    )  # fmt: skip
    cluster.wait_for_nodes()
    try:
        out = tmp_path / "out"
        doc, took = _on_ray(cluster, suite, out, expected, local_out)
        stages = doc["programs"][0]["ran_on"]
        assert [s["stage"] for s in stages] == ["cpu", "gpu"], stages
        assert node.node_id[:12] in stages[1]["node"], stages
        log = (out / ".suite" / "warp_sum.log").read_text(errors="replace")
        assert log.startswith("porter: stage cpu ran on Ray node ") and "porter: stage gpu ran on" in log
        assert "cannot be made on this node" not in log
        report = json.loads((out / "warp_sum" / "report.json").read_text())
        builds = {
            b["toolchain"]: b for b in report["program"]["build"]["programs"] if b["variant"] == "original"
        }
        assert builds["cpu-runtime"]["resumed"] and not builds["nvcc"].get("resumed"), builds
        assert not list((tmp_path / "gpu-node").glob("porter-suite-*-*")), "the node's scratch folder is left"
        again = _doc(porter("port", "--suite", str(suite), "--out", str(out), "--json"))
        assert [p["status"] for p in again["programs"]] == ["resumed"]
        print(
            f"ray, staged: {took:.1f} s (cpu stage on {stages[0]['node']}); local: {expected['seconds']:.1f} s"
        )
    finally:
        cluster.remove_node(node, allow_graceful=False)
