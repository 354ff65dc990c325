"""`porter doctor`: the table, the JSON document and its schema, exit code 0, and the global --no-cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from porter.backends import BACKEND_NAMES, Availability, get_backend

from porter.workflows.doctor import doctor, install_hints, with_hint

KEYS = {"name", "compile", "run", "devices", "toolchain", "hint"}


def porter(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PORTER_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    env.pop("PORTER_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def doctor_json(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = porter("doctor", "--json", tmp_path=tmp_path_factory.mktemp("doctor"))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout)


@pytest.mark.integration
def test_json_schema(doctor_json: dict) -> None:
    assert set(doctor_json) == {"backends", "sandbox"}
    layers = doctor_json["sandbox"]["layers"]
    assert {"seccomp", "filesystem", "network", "rlimits", "parent-death"} <= set(layers)
    assert all(set(v) == {"active", "detail"} for v in layers.values())
    rows = doctor_json["backends"]
    assert [r["name"] for r in rows] == list(BACKEND_NAMES)
    for row in rows:
        assert set(row) == KEYS
        assert isinstance(row["compile"], bool) and isinstance(row["run"], bool)
        assert isinstance(row["toolchain"], str) and isinstance(row["hint"], str)
        assert isinstance(row["devices"], list)
        for device in row["devices"]:
            assert {"name", "kind", "arch", "platform"} <= set(device)
            assert device["backend"] == row["name"]
        if row["run"]:
            assert row["devices"], f"{row['name']} can run but lists no device"
        if not (row["compile"] and row["run"]):
            assert row["hint"], f"{row['name']} lacks something but gives no hint"
            assert "\n" not in row["hint"]
        if row["compile"]:
            assert row["toolchain"]


@pytest.mark.integration
def test_json_agrees_with_the_backends(doctor_json: dict) -> None:
    """What the isolated probe reports is what each backend says in this process."""
    for row in doctor_json["backends"]:
        try:
            found = get_backend(row["name"]).availability()
        except Exception:  # noqa: BLE001 - then doctor must have said it can do nothing
            assert (row["compile"], row["run"]) == (False, False)
            continue
        assert (row["compile"], row["run"]) == (found.compile, found.run), row["name"]
        assert [d["name"] for d in row["devices"]] == [d.name for d in found.devices]
        assert row["toolchain"] == found.toolchain


@pytest.mark.integration
def test_table(tmp_path: Path) -> None:
    out = porter("doctor", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    for word in ("backend", "compile", "run", "toolchain", "devices", "hint", *BACKEND_NAMES):
        assert word in out.stdout


@pytest.mark.integration
def test_no_cache_flag_is_global(tmp_path: Path) -> None:
    out = porter("--no-cache", "doctor", "--json", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [r["name"] for r in json.loads(out.stdout)["backends"]] == list(BACKEND_NAMES)
    assert "--no-cache" in porter("--help", tmp_path=tmp_path).stdout


@pytest.mark.integration
def test_unloadable_backend_gets_an_install_hint() -> None:
    report = doctor(names=("no-such-backend", "cpu"))
    broken = report.backends[0]
    assert (broken.name, broken.compile, broken.run) == ("no-such-backend", False, False)
    assert "no-such-backend" in broken.hint
    assert report.backends[1].name == "cpu"


def test_hint_data_covers_every_backend() -> None:
    hints = install_hints()
    for name in BACKEND_NAMES:
        assert hints[name]["compile"] and hints[name]["run"]
    filled = with_hint(Availability(name="cuda", compile=True, run=False, toolchain="nvrtc 13.0"))
    assert filled.hint == hints["cuda"]["run"]
    failed = with_hint(
        Availability(name="hip", compile=False, run=False, toolchain="", hint="ImportError: x")
    )
    assert failed.hint.startswith(hints["hip"]["compile"]) and "ImportError: x" in failed.hint
    whole = Availability(name="cpu", compile=True, run=True, toolchain="g++ 12")
    assert with_hint(whole) == whole
