"""porter.tempdirs: which run folders a starting porter removes (only its ended processes'), and the run
folder every temporary file of a porter process goes to."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from porter import tempdirs

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")


def _run_folder(base: Path, name: str, marker: str | None) -> Path:
    folder = base / f"{tempdirs.PREFIX}{name}"
    folder.mkdir()
    (folder / "porter-job-x").mkdir()
    if marker is not None:
        (folder / tempdirs.MARKER).write_text(marker)
    return folder


def _marker(**changes: str) -> str:
    owner = {**tempdirs.owner_of(os.getpid()), **changes}
    return "".join(f"{k}={v}\n" for k, v in owner.items())


def test_a_live_process_folder_is_kept(tmp_path: Path) -> None:
    assert not tempdirs.stale(_run_folder(tmp_path, "live", _marker()))


def test_an_ended_process_folder_is_stale(tmp_path: Path) -> None:
    # this pid with another start time: the process that made it ended and its pid was reused
    assert tempdirs.stale(_run_folder(tmp_path, "reused", _marker(start="1")))
    # made before the machine last started
    assert tempdirs.stale(
        _run_folder(tmp_path, "reboot", _marker(boot="00000000-0000-0000-0000-000000000000"))
    )


@pytest.mark.parametrize(
    "marker",
    [
        None,  # no marker: not porter's (or not yet written)
        "",
        "pid=1\n",  # no start time
        "pid=x\nstart=1\n",
        "pid=1\nstart=1\nrm=-rf\n",  # a field porter never writes
        "pid=1\nstart=1\npid=2\n",
    ],
)
def test_a_folder_without_a_marker_porter_wrote_is_kept(tmp_path: Path, marker: str | None) -> None:
    assert not tempdirs.stale(_run_folder(tmp_path, "odd", marker))


def test_another_pid_namespace_is_left_alone(tmp_path: Path) -> None:
    # a porter in a container sharing /tmp: its pids mean nothing here
    assert not tempdirs.stale(_run_folder(tmp_path, "ns", _marker(pidns="pid:[1]", start="1")))


def test_sweep_removes_only_stale_run_folders(tmp_path: Path) -> None:
    dead = _run_folder(tmp_path, "dead", _marker(start="1"))
    live = _run_folder(tmp_path, "live", _marker())
    legacy = tmp_path / "porter-job-abc"  # not a run folder (an older porter's, or anyone's)
    legacy.mkdir()
    other = tmp_path / "elsewhere"
    (other / "inside").mkdir(parents=True)
    (other / tempdirs.MARKER).write_text(_marker(start="1"))
    link = tmp_path / f"{tempdirs.PREFIX}link"
    link.symlink_to(other)  # a link named like a run folder, to a folder with a dead owner's marker
    plain = tmp_path / f"{tempdirs.PREFIX}file"
    plain.write_text(_marker(start="1"))
    assert tempdirs.sweep(str(tmp_path)) == [dead]
    assert not dead.exists()
    assert live.is_dir() and legacy.is_dir() and (other / "inside").is_dir() and link.is_symlink()
    assert plain.is_file()


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tempdirs' state as in a new process, the system's temporary folder at `tmp_path`."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempdirs, "_root", None)
    monkeypatch.setattr(tempdirs, "_owner", 0)
    monkeypatch.delenv("TMPDIR", raising=False)
    yield tmp_path
    tempdirs.finish()


def test_start_sweeps_and_sends_temporary_files_to_its_folder(fresh: Path) -> None:
    dead = _run_folder(fresh, "dead", _marker(start="1"))
    root = tempdirs.start()
    assert root is not None and root.parent == fresh and root.name.startswith(tempdirs.PREFIX)
    assert not dead.exists()
    assert tempdirs.start() == root == tempdirs.root()  # once per process
    assert (root / tempdirs.MARKER).read_text() == _marker()
    assert not tempdirs.stale(root)
    made = Path(tempfile.mkdtemp(prefix="porter-job-"))
    assert made.parent == root and os.environ["TMPDIR"] == str(root)
    tempdirs.finish()
    assert not root.exists() and tempfile.tempdir == str(fresh) and "TMPDIR" not in os.environ
    assert tempdirs.root() is None
