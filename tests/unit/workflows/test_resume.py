"""porter.workflows.resume: one key recipe and one ledger of an earlier report's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porter.workflows.resume import Ledger, code_fingerprint, key_of, sha, write_atomic


def test_the_key_recipe_holds_the_kind_porters_code_and_every_input() -> None:
    assert key_of("program-build", "hip", ["N=4"]) == sha("program-build", code_fingerprint(), "hip", ["N=4"])
    assert key_of("program-build", "hip", ["N=4"]) != key_of("program-build", "hip", ["N=8"])
    assert key_of("program-build", "hip") != key_of("kernel-replay", "hip")  # a row's kind is in its key


def test_the_ledger_finds_every_keyed_row_wherever_the_report_holds_it() -> None:
    doc = {
        "schema": "porter-program-report/1",
        "program": {
            "files": [{"path": "a.cu", "targets": {"hip": {"status": "compiled", "key": "b1"}}}],
            "build": {"programs": [{"variant": "original", "status": "built", "key": "p1"}]},
            "runs": [{"originals": [{"status": "ran", "key": "r1"}], "variants": []}],
        },
        "kernels": [
            {
                "name": "k",
                "replays": [{"variant": "hip", "device": "a", "key": "x"}, {"device": "b", "key": "x"}],
            }
        ],
        "notes": ["key"],  # a plain string is no row
    }
    ledger = Ledger(doc)
    assert ledger.get("b1") == {"status": "compiled", "key": "b1"}
    assert ledger.get("p1") is not None and ledger.get("r1") is not None
    assert [r["device"] for r in ledger.rows("x")] == ["a", "b"]  # every device's row, in order
    assert ledger.get("") is None and ledger.rows("") == [] and ledger.get("nope") is None
    assert len(ledger) == 4 and len(Ledger()) == 0


def test_the_ledger_of_an_output_folder_trusts_only_porters_signed_report(tmp_path: Path) -> None:
    doc = {
        "schema": "porter-program-report/1",
        "kernels": [{"replays": [{"key": "x", "status": "validated"}]}],
    }
    write_atomic(tmp_path / "report.json", json.dumps(doc))  # signed on its way out
    assert Ledger.of(tmp_path, "program").get("x") is not None
    assert len(Ledger.of(tmp_path, "program", fresh=True)) == 0  # --fresh: nothing is lent
    tampered = json.loads((tmp_path / "report.json").read_text())
    tampered["kernels"][0]["replays"][0]["status"] = "failed"
    (tmp_path / "report.json").write_text(json.dumps(tampered))
    with pytest.warns(UserWarning, match="failed its signature check"):
        assert len(Ledger.of(tmp_path, "program")) == 0  # edited: its signature fails, nothing is reused
