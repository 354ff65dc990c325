"""The environment a sandboxed child starts from: an allow-list, never porter's own environment.

Every child that builds or runs code porter did not write -- a kernel job, a model's candidate, a
user's program (``--run``), a project's build command (``--build``), a user's Python module (``lift``,
``generate``) -- gets :func:`scrubbed`: the variables named in ``environment.toml`` (the toolchain's
locations, the locale, porter's own ``PORTER_*`` settings), ``HOME`` and ``TMPDIR`` pointed at the
child's scratch folder, and what porter itself sets for the job.  API keys, tokens and any variable a
user exported for other programs stay in porter's process.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

# One BLAS thread, where porter's own code runs NumPy: a kernel child, porter's own process, a suite's porter
# processes (a user's variable of the same name wins).  None of them does linear algebra, yet NumPy's OpenBLAS
# starts a thread per processor when it is imported, and those threads spin while they wait for work: on a
# 16-core H100 machine `import numpy` took 2.15 CPU-s in 0.23 s of wall (bench/child_start.py), most of a
# kernel child's CPU.  Not a child running a user's code (its program, its Python module): a user's module keeps
# its BLAS as it is, since its run is the baseline a port is timed against; these names are not in the
# allow-list, so they reach no such child.
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def one_blas_thread() -> None:
    """Give this process one BLAS thread, unless the user chose (before NumPy is first imported: OpenBLAS reads
    the variable when it loads)."""
    for name, value in ONE_BLAS_THREAD.items():
        os.environ.setdefault(name, value)


@cache
def _rules() -> dict[str, Any]:
    text = resources.files("porter.sandbox").joinpath("environment.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def looks_secret(name: str) -> bool:
    """Whether a variable of this name may hold a secret (it never reaches a child)."""
    upper = name.upper()
    return any(word in upper for word in _rules()["secret_words"])


def allowed(name: str) -> bool:
    """Whether porter's variable `name` passes to a child."""
    rules = _rules()
    if looks_secret(name):
        return False
    return name in rules["names"] or name.startswith(tuple(rules["prefixes"]))


def scrubbed(
    home: str, extra: Mapping[str, str] | None = None, source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A child's environment: the allowed variables of `source` (default: porter's environment), ``HOME``
    and ``TMPDIR`` at `home` (the child's scratch folder), then `extra` -- what porter sets for this child
    (it wins; a secret-looking name there is dropped too, so no caller can pass a key on by mistake)."""
    source = os.environ if source is None else source
    env = {name: value for name, value in source.items() if allowed(name)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env["HOME"] = home
    env["TMPDIR"] = home
    for name, value in (extra or {}).items():
        if not looks_secret(name):
            env[name] = value
    return env


__all__ = ["ONE_BLAS_THREAD", "allowed", "looks_secret", "one_blas_thread", "scrubbed"]
