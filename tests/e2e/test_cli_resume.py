"""Nothing verified is lost: `porter port` and `porter optimize` stopped by SIGTERM (as `timeout`, CI
cancellation or `docker stop` do) keep what they validated, a re-run resumes it, --fresh starts over,
and an --out that would hold the user's files is refused -- the real CLI in a subprocess, the CPU
emulator, and (for optimize) the fake LLM server through the real SDK."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.llm_server import FakeLLMServer, Hang

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-ant-api03-E2Efake0000SECRET1111value2222xyz"
MODEL = "anthropic:claude-sonnet-4-5"
KERNELS = ("scale", "shift", "square")


def _spec(kernel: str, n: int = 100, hidden: int = 33) -> str:
    return f"""[kernels.{kernel}]
grid = ["(n + 63) / 64"]
block = ["64"]
sizes = [{{ n = {n} }}]
hidden_sizes = [{{ n = {hidden} }}]
args = [
  {{ name = "x", role = "in", dtype = "float32", shape = ["n"] }},
  {{ name = "y", role = "out", dtype = "float32", shape = ["n"] }},
  {{ name = "n", role = "scalar", dtype = "int32", value = "n" }},
]
"""


def _kernel(name: str, body: str) -> str:
    return f"""__global__ void {name}(const float* x, float* y, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = {body};
}}
"""


SOURCE = "\n".join(
    _kernel(k, b) for k, b in zip(KERNELS, ("2.0f * x[i]", "x[i] + 1.0f", "x[i] * x[i]"), strict=True)
)
REWRITE = """Same result, written differently.

```cuda
__global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
}
```
"""


@pytest.fixture
def same_porter() -> Callable[[], None]:
    """Call it after each run: a verdict reached by other porter code is never reused, so when porter's
    own files change while the test runs (someone editing the tree) a re-run rightly resumes nothing,
    and the test cannot tell anything."""
    from porter.workflows.resume import code_fingerprint

    before = code_fingerprint.__wrapped__()

    def check() -> None:
        if code_fingerprint.__wrapped__() != before:
            pytest.skip("porter's code changed while the test ran: nothing could be resumed")

    return check


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


def _program(folder: Path, kernels: tuple[str, ...] = KERNELS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "prog.cu"
    src.write_text(SOURCE if kernels == KERNELS else _kernel("scale", "2.0f * x[i]"))
    (folder / "prog.cu.porter.toml").write_text("\n".join(_spec(k) for k in kernels))
    return src


def _cmd(*args: str) -> list[str]:
    exe = shutil.which("porter")
    return [*([exe] if exe else [sys.executable, "-m", "porter"]), *args]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(COLUMNS="200", ANTHROPIC_API_KEY=KEY)
    env.pop("PORTER_NO_CACHE", None)
    return env


def _report(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        return None


def _rows(doc: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    return [(k["name"], v) for k in (doc or {}).get("kernels", []) for v in k["variants"]]


def _terminate_when(
    proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float = 300
) -> tuple[str, str]:
    """SIGTERM `proc` as soon as `ready()` holds; its output."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and not ready():
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the run never reached the point where it was to be stopped")
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=120)


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- port


def test_port_stopped_by_sigterm_keeps_its_rows_and_reruns_resume(
    tmp_path: Path, emulator: None, same_porter: Callable[[], None]
) -> None:
    src = _program(tmp_path / "src")
    out = tmp_path / "out"
    args = _cmd("port", str(src), "--to", "hip", "--trials", "1", "--out", str(out))
    env = _env(tmp_path)

    def validated(doc: dict[str, Any] | None, *, new: bool = False) -> set[str]:
        return {k for k, v in _rows(doc) if v["status"] == "validated" and (not new or not v.get("resumed"))}

    # 1. stopped once the first kernel validated: exit 143, one line, that row on disk
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, err = _terminate_when(first, lambda: bool(validated(_report(out))))
    assert first.returncode == 143, err
    assert "porter: terminated (SIGTERM)" in err and "Traceback" not in err
    doc = _report(out)
    assert doc is not None and doc["complete"] is False
    kept = validated(doc)
    assert kept and kept < set(KERNELS)

    # 2. the re-run resumes, validates more, and is stopped too: what run 1 validated is still there
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, err = _terminate_when(second, lambda: bool(validated(_report(out)) - kept))
    same_porter()
    assert second.returncode in (0, 143), err  # 0 only if it finished before the signal arrived
    doc = _report(out)
    assert kept <= validated(doc) and validated(doc, new=True)
    assert all(v.get("resumed") for k, v in _rows(doc) if k in kept and v["status"] == "validated")
    kept = validated(doc)

    # 3. the next run finishes; nothing validated before is redone
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    same_porter()
    assert done.returncode == 0, done.stderr
    for k in kept:
        assert f"{k}: validating" not in done.stderr
    assert "kept from the previous report" in done.stdout
    doc = _report(out)
    assert doc["complete"] is True and validated(doc) == set(KERNELS)
    assert {k for k, v in _rows(doc) if v.get("resumed")} >= kept

    # 4. --fresh starts over
    fresh = subprocess.run([*args, "--fresh"], capture_output=True, text=True, env=env, timeout=600)
    assert fresh.returncode == 0, fresh.stderr
    assert all(f"{k}: validating" in fresh.stderr for k in KERNELS)
    assert not any(v.get("resumed") for _, v in _rows(_report(out)))


@pytest.mark.parametrize("command", ["port", "optimize"])
def test_out_at_the_source_folder_is_refused_and_the_users_files_untouched(
    tmp_path: Path, command: str
) -> None:
    src = _program(tmp_path / "src", ("scale",))
    (src.parent / "prog.best.cu").write_text("// my own best version\n")
    (src.parent / "report.json").write_text('{"my": "own report"}\n')
    before = _snapshot(src.parent)
    extra = ["--model", MODEL] if command == "optimize" else ["--to", "hip"]
    for out in (str(src.parent), f"{src.parent}/.", f"{src.parent}/missing/.."):
        res = subprocess.run(
            _cmd(command, str(src), *extra, "--out", out),
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            timeout=300,
        )
        assert res.returncode == 2, res.stdout + res.stderr
        assert res.stderr.strip().count("\n") == 0 and "overwrite" in res.stderr
        assert "Traceback" not in res.stderr
    assert _snapshot(src.parent) == before


@pytest.mark.parametrize("command", ["port", "optimize"])
def test_out_that_is_a_file_is_one_line_exit_2(tmp_path: Path, command: str) -> None:
    src = _program(tmp_path / "src", ("scale",))
    blocker = tmp_path / "taken"
    blocker.write_text("a file\n")
    extra = ["--model", MODEL] if command == "optimize" else ["--to", "hip"]
    res = subprocess.run(
        _cmd(command, str(src), *extra, "--out", str(blocker)),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=300,
    )
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "not a folder" in res.stderr
    assert blocker.read_text() == "a file\n"


# --------------------------------------------------------------------------- optimize


def test_optimize_stopped_in_round_2_keeps_round_1_and_reruns_resume(
    tmp_path: Path, server: FakeLLMServer, emulator: None, same_porter: Callable[[], None]
) -> None:
    src = _program(tmp_path / "src", ("scale",))
    out = tmp_path / "out"
    env = _env(tmp_path)
    env["PORTER_CACHE_DIR"] = str(tmp_path / "cache")
    args = _cmd(
        "optimize",
        str(src),
        "--model",
        MODEL,
        "--base-url",
        server.url,
        "--candidates",
        "1",
        "--out",
        str(out),
    )

    # 1. round 1 validates; round 2's request hangs and the run is stopped then
    server.script(REWRITE, Hang(60))
    run = subprocess.Popen(
        [*args, "--rounds", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    started = time.monotonic()
    _, err = _terminate_when(run, lambda: len(server.requests) >= 2)
    assert run.returncode == 143, err
    assert time.monotonic() - started < 120  # the hanging request was not waited for
    assert "porter: terminated (SIGTERM)" in err and "Traceback" not in err and KEY not in err
    assert f"what was validated so far is in {out / 'report.json'}" in err
    doc = _report(out)
    assert doc is not None and doc["stop_reason"].startswith("interrupted") and doc["exit_code"] == 0
    (attempt,) = doc["attempts"]
    assert attempt["status"] == "validated" and attempt["round"] == 1
    assert doc["outputs"]["best"] == str(out / "prog.best.cu")
    assert (out / "prog.best.cu").read_text().endswith("y[i] = x[i] + x[i];\n}\n")
    assert "validated" in (out / "report.md").read_text()
    assert (out / "attempts" / "candidate1_round1.cu").is_file()
    # the validated candidate's row is stored under the key of the run's inputs: the re-run's ledger finds it
    assert [v["key"] for v in doc["resume"]["validated"]] == [doc["resume"]["identity"]]
    rows = [r for r in doc["kernels"][0]["variants"] if r["kind"] != "original"]  # the original: a reference
    assert rows and all(r["status"] == "validated" and r["round"] == 1 for r in rows)

    # 2. the re-run: round 1's reply comes from the reply cache and its verdict from the report (not
    # validated again); only round 2 is asked
    server.script("No further improvement, sorry: no code this time.")
    asked = len(server.requests)
    again = subprocess.run(
        [*args, "--rounds", "2", "--json"], capture_output=True, text=True, env=env, timeout=600
    )
    same_porter()
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == asked + 1
    doc = _report(out)
    first, second = doc["attempts"]
    assert first["status"] == "validated" and first["resumed"] is True and first["source"] == "cache"
    assert second["status"] == "no-code" and "resumed" not in second
    rows = [r for r in json.loads(again.stdout)["kernels"][0]["variants"] if r["kind"] != "original"]
    assert rows and all(r["status"] == "validated" and r["resumed"] is True for r in rows)
    assert (out / "prog.best.cu").is_file()

    # 3. --fresh validates again what the cache brings back
    fresh = subprocess.run(
        [*args, "--rounds", "1", "--fresh"], capture_output=True, text=True, env=env, timeout=600
    )
    assert fresh.returncode == 0, fresh.stderr
    (attempt,) = _report(out)["attempts"]
    assert attempt["status"] == "validated" and "resumed" not in attempt and attempt["source"] == "cache"
