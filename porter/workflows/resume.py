"""What `porter port` and `porter optimize` share to lose nothing they verified.

* Reports are written atomically (:func:`write_atomic`: a temporary file beside the target, then
  :func:`os.replace`), so an interrupted or killed run leaves the last complete report, never half of one.
* A re-run reads the previous ``report.json`` of its output folder (:func:`load_report`, only a report
  with porter's schema for the same command, signed with porter's state key: see
  :mod:`porter.signing`; an edited one is not used at all) and keeps what it verified for the *same inputs*: every
  verdict is stored with a key over everything it depends on (the source text, the headers it reaches,
  the spec, the options, the toolchain and device, porter's own validation code); a verdict whose key
  differs from the one this run computes is never reused.  ``--fresh`` ignores the previous report.
* :func:`check_out_dir` refuses an output folder porter could not use, or one inside (or equal to) the
  source folder that holds files porter did not write -- before any work.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from porter import signing
from porter.errors import UsageError
from porter.results import SCHEMAS

REPORT_NAME = "report.json"
_LEGACY_FIELDS = {
    "port": ("source", "kernels", "targets", "complete", "exit_code"),
    "optimize": ("source", "kernels", "model", "attempts", "exit_code"),
}
# porter's own code that decides what is compiled and how it is judged (the backends have theirs in
# every toolchain id): a verdict reached by other code is never reused.
_FINGERPRINTED = ("harness", "lift", "scan", "translate", "workflows")
_SUFFIXES = (".py", ".toml")


# --------------------------------------------------------------------------- hashing


def sha(*parts: object) -> str:
    """sha256 (hex) over the length-prefixed parts; anything not a string or bytes is hashed as JSON."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes):
            raw = b"b" + part
        elif isinstance(part, str):
            raw = b"s" + part.encode("utf-8", "surrogateescape")
        else:
            raw = b"j" + json.dumps(part, sort_keys=True, separators=(",", ":"), default=str).encode(
                "utf-8", "surrogateescape"
            )
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()


def key_of(kind: str, *parts: object) -> str:
    """The one key recipe of every row a command may reuse: what the row is (`kind`), porter's own code
    and everything the row's verdict depends on (`parts`)."""
    return sha(kind, code_fingerprint(), *parts)


class Ledger:
    """The rows an earlier report holds, by their key (:func:`key_of`): every command's resume and reuse
    asks it.  Built from the signed report.json of the output folder (:func:`load_report`: an edited or
    foreign one holds nothing); a row is reused only when the key of what would be made now is the one
    it was stored under."""

    def __init__(self, earlier: Mapping[str, Any] | None = None) -> None:
        self._rows: dict[str, list[Mapping[str, Any]]] = {}
        stack: list[Any] = [earlier] if earlier is not None else []
        while stack:  # every object of the document carrying a key, wherever it sits
            item = stack.pop()
            if isinstance(item, Mapping):
                key = item.get("key")
                if isinstance(key, str) and key:
                    self._rows.setdefault(key, []).append(item)
                stack.extend(reversed(list(item.values())))
            elif isinstance(item, list):
                stack.extend(reversed(item))

    @classmethod
    def of(cls, out: Path, kind: str, fresh: bool = False) -> Ledger:
        """The ledger of the ``porter <kind>`` report in `out` (empty when ``fresh``)."""
        return cls(None if fresh else load_report(out, kind))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """The first row stored under `key` (None for "" or a key no row has)."""
        rows = self._rows.get(key) if key else None
        return rows[0] if rows else None

    def rows(self, key: str) -> list[Mapping[str, Any]]:
        """Every row stored under `key`, in the document's order."""
        return list(self._rows.get(key, ())) if key else []

    def __len__(self) -> int:
        return len(self._rows)


@functools.cache
def code_fingerprint() -> str:
    """porter's version and a hash of its code that compiles and judges (see _FINGERPRINTED)."""
    from porter import __version__
    from porter.cache import hash_tree

    h = hashlib.sha256(f"porter {__version__}\0".encode())
    root = resources.files("porter")
    for package in _FINGERPRINTED:
        hash_tree(h, root.joinpath(package), _SUFFIXES, prefix=f"{package}/")
    # and porter's own top-level modules (the model, program discovery, includes, file reading)
    for node in sorted(root.iterdir(), key=lambda n: n.name):
        if node.is_file() and node.name.endswith(_SUFFIXES):
            data = node.read_bytes()
            h.update(node.name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:16]


def toolchain_of(backend: str, device: Any = None, arch: str | None = None) -> str | None:
    """What compiles for (`device`, `arch`) on `backend`: its toolchain id and the backend's own files;
    None when it cannot be told (then nothing depending on it is reused)."""
    from porter.backends import get_backend
    from porter.cache import backend_fingerprint

    try:
        found = get_backend(backend).toolchain_id(device, arch)
    except Exception:  # noqa: BLE001 - an unknown toolchain only means nothing is reused
        return None
    return f"{found}|{backend_fingerprint(backend)}" if found else None


# --------------------------------------------------------------------------- files


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and :func:`os.replace`:
    a reader (or a run killed half-way) sees the old file or the new one, never a part.  A
    ``report.json`` is signed on its way out (:func:`porter.signing.sign_json_text`): what a re-run
    resumes from it is what porter wrote, not an edit."""
    if path.name == REPORT_NAME:
        text = signing.sign_json_text(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_porter_report(doc: object, kind: str) -> bool:
    """Whether `doc` is a report.json that ``porter <kind>`` wrote."""
    if not isinstance(doc, Mapping):
        return False
    schema = doc.get("schema")
    if schema is not None:
        return schema == SCHEMAS[kind]
    legacy = _LEGACY_FIELDS.get(kind)
    return legacy is not None and all(f in doc for f in legacy) and isinstance(doc.get("kernels"), list)


def load_report(out: Path, kind: str) -> dict[str, Any] | None:
    """The previous ``porter <kind>`` report in `out` whose signature checks under the state key
    (:mod:`porter.signing`), without it; None when there is none, it is unreadable or not porter's --
    or it fails the check (edited, unsigned, another key's): then nothing in it is reused, and a
    ``porter: warning`` line says so."""
    doc = _read_report(out, kind)
    if doc is None:
        return None
    problem = signing.json_problem(doc)
    if problem is not None:
        signing.warn(f"{out / REPORT_NAME} {problem}: nothing in it is reused; every row is recomputed")
        return None
    del doc[signing.SIGNATURE_FIELD]
    return doc


def _read_report(out: Path, kind: str) -> dict[str, Any] | None:
    """The ``porter <kind>`` report in `out` as it stands (its signature unchecked), or None."""
    try:
        doc = json.loads((out / REPORT_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if is_porter_report(doc, kind) else None


# --------------------------------------------------------------------------- sealed files

# in a folder of kept files a re-run reuses (a build's executables, a run's output)
SEAL_NAME = ".porter-seal"


def seal(folder: Path, files: Sequence[Path]) -> None:
    """Sign `files` (their names and sha256) into ``folder/.porter-seal``: what a re-run finds there is
    what porter kept (:func:`sealed`).  A file that cannot be read leaves no seal (nothing is reused)."""
    try:
        doc = {"files": _digests(folder, files)}
        text = signing.sign_json_text(json.dumps(doc, indent=1))
        write_atomic(folder / SEAL_NAME, text)
    except OSError:
        with contextlib.suppress(OSError):
            (folder / SEAL_NAME).unlink()


def sealed(folder: Path, files: Sequence[Path]) -> bool:
    """Whether `files` are, byte for byte, what :func:`seal` signed into `folder` (always, for none).
    When not -- a file or the seal edited, a seal missing -- a ``porter: warning`` says so and the
    caller does the work again."""
    if not files:
        return True
    try:
        doc = json.loads((folder / SEAL_NAME).read_text(encoding="utf-8"))
        problem = signing.json_problem(doc) if isinstance(doc, dict) else "is not a seal"
        if problem is None and doc.get("files") != _digests(folder, files):
            problem = "does not match the files it seals (one was changed)"
    except (OSError, ValueError, UnicodeDecodeError):
        problem = "is missing or unreadable"
    if problem is not None:
        signing.warn(f"{folder / SEAL_NAME} {problem}: what it kept is not reused; it is done again")
    return problem is None


def _digests(folder: Path, files: Sequence[Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in files:
        name = os.path.relpath(os.path.abspath(path), os.path.abspath(folder))
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        out[name] = h.hexdigest()
    return out


def is_porter_output(out: Path) -> bool:
    """Whether the folder holds a report.json that a porter command wrote (by its shape: this decides
    only that porter may write there again, never what is reused)."""
    return any(_read_report(out, kind) is not None for kind in SCHEMAS)


def check_out_dir(out: Path, source: Path, kind: str) -> None:
    """UsageError (exit 2, one line) unless porter can write its outputs to `out` without touching a
    file of the user's: `out` must be a folder or not exist yet, and be writable; inside or equal to
    the source's folder it must be empty, new, or a previous porter output (its report.json)."""
    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    try:
        resolved = out.resolve()
    except (OSError, RuntimeError) as err:
        raise UsageError(f"--out is not a usable folder ({err})", path=str(out)) from None
    nearest = resolved
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise UsageError(f"--out cannot be created: {nearest} is not a folder", path=str(out))
    if not os.access(nearest, os.W_OK | os.X_OK):
        what = "is not writable" if nearest == resolved else f"cannot be created in {nearest} (not writable)"
        raise UsageError(f"--out {what}", path=str(out))
    src_dir = source.resolve().parent
    inside = resolved == src_dir or resolved.is_relative_to(src_dir)
    if not inside or not resolved.is_dir() or not any(resolved.iterdir()) or is_porter_output(resolved):
        _create(resolved, out)
        return
    where = "is the source folder" if resolved == src_dir else "is inside the source folder"
    raise UsageError(
        f"--out {where} and holds files that are not a porter output; porter would overwrite "
        f"them: choose a new or empty folder (porter {kind} never writes over your files)",
        path=str(out),
    )


def _create(resolved: Path, out: Path) -> None:
    """Whether the output folder can be made, tried for real and undone: a read-only or virtual file
    system, where even root's permission check passes, is refused before any work (and before a
    missing API key is reported, nothing is left behind)."""
    made: list[Path] = []
    folder = resolved
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    try:
        for path in reversed(made):
            path.mkdir()
    except OSError as err:
        raise UsageError(f"--out cannot be created: {err.strerror or err}", path=str(out)) from None
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()


# --------------------------------------------------------------------------- optimize's evaluations


def evaluation_from_json(doc: Mapping[str, Any]) -> Any:
    """An :class:`porter.records.Evaluation` back from its report.json form (``to_jsonable`` of it);
    TypeError / KeyError / ValueError when the document is not one."""
    from porter.model import Status, Timing, Verdict
    from porter.records import Evaluation

    def verdict(v: Mapping[str, Any]) -> Verdict:
        timing = v.get("timing")
        return Verdict(
            **{
                **v,
                "status": Status(v["status"]),
                "sizes": tuple(dict(s) for s in v.get("sizes") or ()),
                "timing": Timing(**timing) if timing is not None else None,
                "logs": tuple(str(x) for x in v.get("logs") or ()),
                "checks": tuple(str(x) for x in v.get("checks") or ()),
            }
        )

    return Evaluation(
        **{
            **doc,
            "sizes": tuple(dict(s) for s in doc.get("sizes") or ()),
            "checks": tuple(str(x) for x in doc.get("checks") or ()),
            "verdicts": tuple(verdict(v) for v in doc.get("verdicts") or ()),
            "timings": tuple(dict(t) for t in doc.get("timings") or ()),
        }
    )
