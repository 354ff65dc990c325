"""A deliverable is the file on disk, not the text in memory: what a workflow reports as validated is
read back after it is written and compared, byte for byte, with the text that was built and run.

The written file and the validated text are the same bytes, so the file builds and runs as the
validated text did (the validation built exactly these bytes); a file that differs is not vouched for:
the caller removes it and says why.
"""

from __future__ import annotations

from pathlib import Path


def differs(path: Path, text: str) -> str:
    """'' when `path` holds exactly `text` (as :func:`porter.workflows.resume.write_atomic` encodes it),
    else what is wrong with it."""
    try:
        data = path.read_bytes()
    except OSError as err:
        return f"{path.name} cannot be read back: {err.strerror or err}"
    want = text.encode("utf-8", "surrogateescape")
    if data == want:
        return ""
    at = next(
        (i for i, (a, b) in enumerate(zip(data, want, strict=False)) if a != b), min(len(data), len(want))
    )
    line = want[:at].count(b"\n") + 1
    return f"{path.name} as written differs from the validated text (first at line {line})"


def comment_only(header: str) -> str:
    """'' when every line of `header` is a ``//`` comment that cannot reach the next line (no trailing
    backslash): put before validated code, it changes no token of it; else the first offending line."""
    for n, line in enumerate(header.splitlines(), 1):
        if not line.startswith("//") or line.rstrip().endswith("\\") or "??/" in line:
            return f"line {n} of its header is not a plain comment"
    return ""


__all__ = ["comment_only", "differs"]
