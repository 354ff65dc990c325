"""A capture folder is read as porter wrote it, or refused (issue #37, item 10): a manifest entry naming
/etc/shadow or ../.., a record the manifest does not list, an array whose size, dtype or hash is not what
its record and the manifest say -- each a UsageError (exit 2) naming the file and the record, never a
launch silently dropped and never a verdict on the variant.  Captures are made here in Python, as the
runtime writes them (docs/CAPTURE_FORMAT.md), then :func:`porter.capture.finish` adds the manifest."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes.captures import make, record

from porter import capture
from porter.errors import UsageError


@pytest.fixture
def cap(tmp_path: Path) -> Path:
    return make(tmp_path / "cap")


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def refused(folder: Path, *words: str) -> UsageError:
    with pytest.raises(UsageError) as err:
        capture.load(folder)
    message = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in message
    for word in words:
        assert word in message, message
    return err.value


def test_a_capture_as_porter_wrote_it_loads_with_its_hashes(cap: Path) -> None:
    manifest = json.loads((cap / capture.MANIFEST).read_text())
    assert manifest["arrays"]["arrays/k0-1-a0-before.bin"]["bytes"] == 16
    assert len(manifest["arrays"]["arrays/k0-1-a0-after.bin"]["sha256"]) == 64
    loaded = capture.load(cap)
    assert [(la.kernel, la.launch) for la in loaded.launches] == [("scale", 1), ("scale", 2)]
    assert not loaded.problems
    after = np.frombuffer(loaded.launches[1].array(0, "after"), np.float32)
    assert after.tolist() == [1, 2, 3, 4]  # launch 2: [2, 4, 6, 8] halved


def test_a_capture_from_before_hashes_is_held_to_sizes(cap: Path) -> None:
    edit_json(cap / capture.MANIFEST, lambda m: m.pop("arrays"))
    assert len(capture.load(cap).launches) == 2
    (cap / "arrays" / "k0-1-a0-after.bin").write_bytes(b"\0" * 12)
    refused(cap, "k0-1-a0-after.bin holds 12 bytes, its record says 16", "launch 1 of scale")


@pytest.mark.parametrize("name", ["/etc/shadow", "../../etc/shadow", "launches/../../x.json", "arrays/k.bin"])
def test_a_manifest_naming_a_file_outside_the_capture_is_refused(cap: Path, name: str) -> None:
    edit_json(cap / capture.MANIFEST, lambda m: m["launches"].insert(1, name))
    err = refused(cap, f"launches[1] names {name!r}", "changed after porter wrote it")
    assert err.path == str(cap / capture.MANIFEST)


def test_a_record_naming_a_file_outside_the_capture_is_refused_not_skipped(cap: Path) -> None:
    def outside(doc: dict[str, Any]) -> None:
        doc["allocations"][0]["before"] = "../../../etc/passwd"

    edit_json(cap / "launches" / "k0-s1.json", outside)
    err = refused(cap, "record 1 (launches/k0-s1.json)", "arrays/<name>.bin")
    assert err.path == str(cap / "launches" / "k0-s1.json")


def test_an_array_changed_after_the_capture_is_refused(cap: Path) -> None:
    data = bytearray((cap / "arrays" / "k0-2-a0-after.bin").read_bytes())
    data[0] ^= 1  # same size: only the hash can tell
    (cap / "arrays" / "k0-2-a0-after.bin").write_bytes(bytes(data))
    err = refused(cap, "launch 2 of scale (record 1", "allocation 0 after", "does not match the sha256")
    assert err.path == str(cap / "arrays" / "k0-2-a0-after.bin")


def test_an_array_that_is_a_link_is_refused(cap: Path) -> None:
    target = cap / "arrays" / "k0-1-a0-before.bin"
    target.unlink()
    os.symlink("/etc/passwd", target)
    refused(cap, "k0-1-a0-before.bin is not a file of the capture", "launch 1 of scale")


def test_a_missing_array_is_refused(cap: Path) -> None:
    (cap / "arrays" / "k0-1-a0-before.bin").unlink()
    refused(cap, "k0-1-a0-before.bin is missing")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["args"][0].update(dtype="object"), "dtype 'object'"),
        (lambda d: d["args"][0].update(dtype="float64"), "is float64 but its elements are 4 bytes"),
        (lambda d: d["args"][1].update(dtype="int16"), "is int16 in 4 bytes"),
        (lambda d: d["args"][1].update(hex="zz"), "not hexadecimal"),
        (lambda d: d["args"][0].update(allocation=3), "allocation 3, which the record lacks"),
        (lambda d: d["args"][0].update(offset=64), "points 64 bytes into"),
        (lambda d: d["args"][0].update(kind="function"), "kind 'function'"),
        (lambda d: d["allocations"][0].update(bytes=-16), "not a whole number"),
        (lambda d: d.update(block=[4, 1]), "ValueError"),
        (lambda d: d.pop("kernel"), "KeyError"),
    ],
)
def test_a_record_that_does_not_match_its_arrays_or_types_is_refused(
    cap: Path, change: Callable[[dict[str, Any]], None], words: str
) -> None:
    edit_json(cap / "launches" / "k0-s0.json", change)
    refused(cap, "record 0 (launches/k0-s0.json)", words)


def test_a_record_the_manifest_does_not_list_is_refused(cap: Path) -> None:
    (cap / "launches" / "k9-s0.json").write_text(json.dumps(record(9, 9)))
    refused(cap, "launches/k9-s0.json is a record the manifest does not list")


def test_a_record_renamed_to_another_kernel_or_launch_is_refused(cap: Path) -> None:
    edit_json(cap / "launches" / "k0-s0.json", lambda d: d.update(kernel="other"))
    refused(cap, "'kernels' and the records disagree")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.update(launches="launches/k0-s0.json"),
        lambda m: m.update(kernels=["scale"]),
        lambda m: m.update(problems=None),
        lambda m: m.update(arrays=[]),
        lambda m: m.update(run="first"),
    ],
)
def test_a_malformed_manifest_is_refused(cap: Path, change: Callable[[dict[str, Any]], None]) -> None:
    edit_json(cap / capture.MANIFEST, change)
    err = refused(cap)
    assert err.path == str(cap / capture.MANIFEST)


def test_an_unreadable_manifest_is_refused(cap: Path) -> None:
    (cap / capture.MANIFEST).write_text("{half a manifest")
    refused(cap, "unreadable capture manifest")


def test_a_record_the_run_itself_left_damaged_is_a_problem_not_a_refusal(tmp_path: Path) -> None:
    """A run killed half-way can leave a torn record: finish() lists it among the problems, and load
    reports it so (the other launches are used)."""
    folder = tmp_path / "cap"
    (folder / "launches").mkdir(parents=True)
    make(tmp_path / "seed")  # arrays and records of two launches, then one torn before the manifest
    for sub in ("launches", "arrays"):
        for p in (tmp_path / "seed" / sub).iterdir():
            (folder / sub).mkdir(exist_ok=True)
            (folder / sub / p.name).write_bytes(p.read_bytes())
    (folder / "launches" / "k0-s1.json").write_text("{half a record")
    capture.finish(folder, "./main", 1, None)
    loaded = capture.load(folder)
    assert [la.launch for la in loaded.launches] == [1]
    assert any("k0-s1.json: damaged launch record" in p for p in loaded.problems)
    # the same damage made afterwards, to a record the run wrote whole, is a changed capture
    (folder / "launches" / "k0-s0.json").write_text("{torn later")
    refused(folder, "record 0 (launches/k0-s0.json): damaged launch record")


def test_a_run_folder_that_is_a_link_is_refused(cap: Path, tmp_path: Path) -> None:
    parent = tmp_path / "runs"
    parent.mkdir()
    (parent / "run-1").symlink_to(cap)
    refused(parent, "symbolic link")


def test_a_record_whose_arrays_the_run_left_short_is_a_problem_of_the_run(tmp_path: Path) -> None:
    """An array the run itself did not write whole (killed half-way) makes its record a problem when the
    manifest is written -- not a capture changed later."""
    folder = tmp_path / "cap"
    seed = make(tmp_path / "seed")
    for sub in ("launches", "arrays"):
        (folder / sub).mkdir(parents=True)
        for p in (seed / sub).iterdir():
            (folder / sub / p.name).write_bytes(p.read_bytes())
    (folder / "arrays" / "k0-2-a0-after.bin").write_bytes(b"\0" * 8)
    capture.finish(folder, "./main", 1, None)
    loaded = capture.load(folder)
    assert [la.launch for la in loaded.launches] == [1]
    assert any(
        "k0-s1.json: damaged launch record" in p and "not a file of 16 bytes" in p for p in loaded.problems
    )
