"""porter.signing and the signed cache: the per-user state key (private, made once, replaced when
exposed, rotatable), signed cache entries and reports that a file edit cannot forge, and the outbox
through which a sandboxed child -- which never holds the key -- hands what it compiled to its parent."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import warnings
from pathlib import Path

import pytest

from porter import cache as cache_mod
from porter import signing
from porter.cache import Cache, settle_outbox
from porter.errors import PorterError
from porter.workflows import resume


@pytest.fixture(autouse=True)
def _private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder and a cache of this test's own; the per-process key memo forgotten."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)
    monkeypatch.delenv("PORTER_SANDBOX_PLAN", raising=False)
    monkeypatch.delenv(cache_mod.ENV_OUTBOX, raising=False)
    monkeypatch.setattr(signing, "_KEYS", {})
    return tmp_path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def forget() -> None:
    signing._KEYS.clear()  # as a new porter process would: read from disk again


# --------------------------------------------------------------------------- the key file


def test_the_key_is_made_once_private_and_read_back(_private: Path) -> None:
    key = signing.state_key()
    path = _private / "config" / "porter" / "state.key"
    assert signing.key_path() == path and len(key) == 32
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert path.read_text().strip() == key.hex()
    forget()
    assert signing.state_key() == key  # the next process reads the same key
    assert not [p for p in path.parent.iterdir() if p.name != "state.key"]  # no temporary file left


def test_the_home_config_folder_is_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert signing.key_path() == tmp_path / "home" / ".config" / "porter" / "state.key"


@pytest.mark.parametrize("spoil", ["readable", "writable", "garbage", "symlink"])
def test_a_key_others_could_read_or_that_is_not_one_is_replaced(_private: Path, spoil: str) -> None:
    old = signing.state_key()
    path = signing.key_path()
    if spoil == "readable":
        path.chmod(0o644)
    elif spoil == "writable":
        path.chmod(0o620)
    elif spoil == "garbage":
        path.write_text("not a key\n")
    else:
        other = _private / "elsewhere.key"
        other.write_text(os.urandom(32).hex())
        other.chmod(0o600)
        path.unlink()
        path.symlink_to(other)
    forget()
    with pytest.warns(signing.StateWarning, match="was not used"):
        new = signing.state_key()
    assert new != old and not path.is_symlink() and mode(path) == 0o600
    assert path.read_text().strip() == new.hex()


def test_a_config_folder_others_can_write_is_refused(_private: Path) -> None:
    signing.state_key()
    folder = signing.config_dir()
    folder.chmod(0o777)
    forget()
    with pytest.raises(PorterError, match="writable by others") as err:
        signing.state_key()
    assert err.value.exit_code == 2 and str(folder) in str(err.value)


def test_a_key_where_sandboxed_children_may_read_is_refused(
    _private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(_private / "cache" / "config"))  # beneath the cache root
    with pytest.raises(PorterError, match="sandboxed children may read") as err:
        signing.state_key()
    assert err.value.exit_code == 2
    assert not (_private / "cache" / "config" / "porter" / "state.key").exists()


def test_a_sandboxed_child_never_loads_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTER_SANDBOX_PLAN", "{}")
    with pytest.raises(RuntimeError, match="never used in a sandboxed child"):
        signing.state_key()
    assert Cache().enabled is False  # and a child without an outbox has no cache at all


def test_the_duplicated_folder_rules_agree(_private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """signing reads the cache root, and the sandbox the config folder, without importing the module
    that owns the rule (import cycles): the copies must agree."""
    from porter import sandbox

    for env in ({"PORTER_CACHE_DIR": str(_private / "c")}, {"XDG_CACHE_HOME": str(_private / "x")}, {}):
        for name in ("PORTER_CACHE_DIR", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert signing._cache_root() == cache_mod.default_root()
    signing.state_key()
    assert sandbox._hidden() == [str(signing.config_dir())]


# --------------------------------------------------------------------------- signed cache entries


def _envelope(blob: bytes) -> tuple[bytes, bytes, bytes, bytes, int, bytes]:
    magic, key, ident, mac, length = cache_mod._HEADER.unpack_from(blob)
    return magic, key, ident, mac, length, blob[cache_mod._HEADER.size :]


def test_an_entry_rewritten_with_every_hash_recomputed_is_ignored_and_removed(_private: Path) -> None:
    """The probe's attack: a cache entry's payload swapped and every hash an editor can compute made to
    match -- the old format's sha256, the length -- is served no more: only the key signs."""
    c = Cache()
    k = Cache.key("original kernel")
    c.put("binaries", k, b"the original kernel's binary")
    path = c.path("binaries", k)
    magic, key, ident, mac, _, _ = _envelope(path.read_bytes())
    forged = b"another kernel's binary, longer"
    path.write_bytes(cache_mod._HEADER.pack(magic, key, ident, mac, len(forged)) + forged)
    with pytest.warns(signing.StateWarning, match=f"binaries/{k[:16]} failed its signature check"):
        assert c.get("binaries", k) is None
    assert not path.exists()
    # a MAC made with a key of the editor's own, or the previous (hashed) format: no better
    other = signing.tag("cache-entry", b"binaries", bytes.fromhex(k), forged, key=b"\x01" * 32)
    path.write_bytes(cache_mod._HEADER.pack(magic, key, ident, other, len(forged)) + forged)
    with pytest.warns(signing.StateWarning):
        assert c.get("binaries", k) is None
    digest = hashlib.sha256(b"binaries\0" + forged).digest()
    path.write_bytes(
        struct.pack(">8s32s32sQ", b"PORTERC\x02", bytes.fromhex(k), digest, len(forged)) + forged
    )
    assert c.get("binaries", k) is None
    c.put("binaries", k, b"recomputed")
    assert c.get("binaries", k) == b"recomputed"


def test_rotation_makes_every_signed_entry_and_report_a_miss(_private: Path) -> None:
    c = Cache()
    k = Cache.key("entry")
    c.put("llm", k, b"a reply")
    out = _private / "out"
    resume.write_atomic(out / "report.json", json.dumps({"schema": "porter-lift-report/1", "rows": [1]}))
    assert c.get("llm", k) == b"a reply" and resume.load_report(out, "lift") is not None
    old = signing.key_path().read_bytes()
    assert signing.rotate() == signing.key_path()
    assert signing.key_path().read_bytes() != old and mode(signing.key_path()) == 0o600
    with pytest.warns(signing.StateWarning, match="another state key"):
        assert c.get("llm", k) is None
    with pytest.warns(signing.StateWarning, match="another state key"):
        assert resume.load_report(out, "lift") is None
    assert c.path("llm", k).exists()  # another key's entry is left for its put to replace
    c.put("llm", k, b"asked again")
    assert c.get("llm", k) == b"asked again"


def test_doctor_rotates_the_key(_private: Path) -> None:
    from typer.testing import CliRunner

    from porter.cli import app

    old = signing.state_key()
    result = CliRunner().invoke(app, ["doctor", "--rotate-state-key"])
    assert result.exit_code == 0 and "new state key" in result.output, result.output
    forget()
    assert signing.state_key() != old


# --------------------------------------------------------------------------- the child's outbox


def _as_child(monkeypatch: pytest.MonkeyPatch, outbox: str) -> None:
    monkeypatch.setenv("PORTER_SANDBOX_PLAN", "{}")
    monkeypatch.setenv(cache_mod.ENV_OUTBOX, outbox)


def test_a_child_writes_to_its_outbox_and_the_parent_signs_it(
    _private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = Cache()
    used = Cache.key("used")
    shared.put("binaries", used, b"signed by the parent")
    outbox = cache_mod.make_outbox()
    assert mode(Path(outbox)) == 0o700
    with monkeypatch.context() as m:
        _as_child(m, outbox)
        child = Cache()
        assert child.get("binaries", used) == b"signed by the parent"  # read, noted in the journal
        fresh = Cache.key("fresh")
        assert child.put("binaries", fresh, b"compiled by the child")
        assert child.get("binaries", fresh) == b"compiled by the child"  # its own, from its outbox
        assert not shared.path("binaries", fresh).exists()  # the shared cache is not the child's
    journal = [json.loads(line) for line in (Path(outbox) / cache_mod.JOURNAL).read_text().splitlines()]
    assert [(d["namespace"], d["key"]) for d in journal] == [("binaries", used)]
    assert settle_outbox(outbox) == []
    assert not Path(outbox).exists()
    assert shared.get("binaries", fresh) == b"compiled by the child"  # now signed, in the shared cache


def test_a_forged_entry_a_child_used_is_caught_after_the_job(
    _private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child cannot check signatures; the parent does, for every entry the child noted: one that
    fails makes the job untrusted (run again without the cache) and nothing the child wrote is signed."""
    shared = Cache()
    k = Cache.key("reference")
    shared.put("binaries", k, b"the real reference")
    path = shared.path("binaries", k)
    magic, key, ident, mac, _, _ = _envelope(path.read_bytes())
    forged = b"a wrong reference"
    path.write_bytes(cache_mod._HEADER.pack(magic, key, ident, mac, len(forged)) + forged)
    outbox = cache_mod.make_outbox()
    with monkeypatch.context() as m:
        _as_child(m, outbox)
        child = Cache()
        assert child.get("binaries", k) == forged  # the frame is whole: the child cannot tell
        child.put("binaries", Cache.key("other"), b"built beside it")
    with pytest.warns(signing.StateWarning, match=f"binaries/{k[:16]} failed its signature check"):
        assert settle_outbox(outbox) == [f"binaries/{k[:16]}"]
    assert not path.exists()
    assert shared.get("binaries", Cache.key("other")) is None


def test_an_entry_swapped_back_after_the_child_read_it_is_caught(
    _private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = Cache()
    k = Cache.key("raced")
    shared.put("binaries", k, b"genuine")
    genuine = shared.path("binaries", k).read_bytes()
    magic, key, ident, mac, _, _ = _envelope(genuine)
    shared.path("binaries", k).write_bytes(cache_mod._HEADER.pack(magic, key, ident, mac, 6) + b"forged")
    outbox = cache_mod.make_outbox()
    with monkeypatch.context() as m:
        _as_child(m, outbox)
        assert Cache().get("binaries", k) == b"forged"
    shared.path("binaries", k).write_bytes(genuine)  # put back before the parent looks
    with pytest.warns(signing.StateWarning):
        assert settle_outbox(outbox) == [f"binaries/{k[:16]}"]


# --------------------------------------------------------------------------- signed reports


REPORT = {
    "schema": "porter-port-report/1",
    "kernels": [{"name": "scale", "status": "failed", "x": "é\udcff"}],
}


def test_a_report_is_signed_as_written_and_checked_when_read(_private: Path) -> None:
    from porter.results import SCHEMAS

    doc = {**REPORT, "schema": SCHEMAS["port"]}
    text = json.dumps(doc, indent=2) + "\n"
    signed = signing.sign_json_text(text)
    assert signed.startswith(text.rstrip()[:-1].rstrip())  # the writer's text kept, the member added last
    assert list(json.loads(signed))[-1] == "signature"
    out = _private / "out"
    resume.write_atomic(out / "report.json", text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resume.load_report(out, "port") == doc  # checked, and handed back without its signature
    resume.write_atomic(out / "notes.txt", text)
    assert (out / "notes.txt").read_text() == text  # only report.json is signed
    assert signing.sign_json_text("[1, 2]") == "[1, 2]" and signing.sign_json_text("{}").startswith("{\n")


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ("flip", "failed its signature check"),
        ("strip", "has no signature"),
        ("mangle", "malformed signature"),
        ("reorder", None),
    ],
)
def test_an_edited_report_is_not_resumed(_private: Path, edit: str, why: str | None) -> None:
    """failed -> validated by hand: the whole report is set aside (every row recomputed), with a
    warning naming the file; an edit that changes nothing (formatting, member order) is no edit."""
    from porter.results import SCHEMAS

    out = _private / "out"
    resume.write_atomic(out / "report.json", json.dumps({**REPORT, "schema": SCHEMAS["port"]}))
    doc = json.loads((out / "report.json").read_text())
    if edit == "flip":
        doc["kernels"][0]["status"] = "validated"
    elif edit == "strip":
        del doc["signature"]
    elif edit == "mangle":
        doc["signature"] = "hmac-sha256:zz"
    else:
        doc = dict(reversed(list(doc.items())))
    (out / "report.json").write_text(json.dumps(doc, indent=4))
    if why is None:
        assert resume.load_report(out, "port") is not None
        return
    with pytest.warns(signing.StateWarning, match=why) as seen:
        assert resume.load_report(out, "port") is None
    assert str(out / "report.json") in str(seen[0].message) and "recomputed" in str(seen[0].message)
    assert resume.is_porter_output(out)  # still porter's folder: porter may write there again


# --------------------------------------------------------------------------- sealed folders


def test_a_kept_run_output_edited_afterwards_is_not_reused(_private: Path) -> None:
    """A program port keeps each run's output (runs/<key>/: stdout.txt, run.json, files/) and a re-run
    compares against it instead of running again: the original's stdout edited to say what a wrong
    port prints must not be what the port is compared with."""
    from porter.workflows.program_run import _keep_output, _load_output

    scratch = _private / "runs" / "0123456789abcdef"
    (scratch / "tree").mkdir(parents=True)
    (scratch / "stdout.txt").write_text("sum = 42\n")
    (scratch / "tree" / "result.dat").write_bytes(b"\x01\x02")
    _keep_output(scratch, 0, {"result.dat": scratch / "tree" / "result.dat"})
    kept = _load_output(scratch)
    assert kept is not None and kept.exit == 0 and set(kept.files) == {"result.dat"}
    for path, data in ((scratch / "stdout.txt", b"sum = 41\n"), (scratch / "files" / "result.dat", b"\x09")):
        before = path.read_bytes()
        path.write_bytes(data)
        with pytest.warns(signing.StateWarning, match="one was changed"):
            assert _load_output(scratch) is None
        path.write_bytes(before)
        assert _load_output(scratch) is not None
    (scratch / resume.SEAL_NAME).unlink()
    with pytest.warns(signing.StateWarning, match="missing"):
        assert _load_output(scratch) is None


def test_a_seal_is_signed_and_holds_only_for_the_files_it_names(_private: Path) -> None:
    folder = _private / "build"
    folder.mkdir()
    exe = folder / "main"
    exe.write_bytes(b"\x7fELF the original")
    resume.seal(folder, [exe])
    assert resume.sealed(folder, [exe]) and resume.sealed(folder, [])
    exe.write_bytes(b"\x7fELF a wrong port")  # the original's executable swapped
    with pytest.warns(signing.StateWarning, match="one was changed"):
        assert not resume.sealed(folder, [exe])
    doc = json.loads((folder / resume.SEAL_NAME).read_text())  # the seal rewritten to match: unsigned
    doc["files"]["main"] = hashlib.sha256(exe.read_bytes()).hexdigest()
    (folder / resume.SEAL_NAME).write_text(json.dumps(doc))
    with pytest.warns(signing.StateWarning, match="failed its signature check"):
        assert not resume.sealed(folder, [exe])
