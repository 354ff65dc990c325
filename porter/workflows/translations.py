"""A program port's translations, remembered on disk by everything they depend on.

A re-run of ``porter port DIR`` on unchanged files reuses each file's translation instead of parsing
and translating it again (most of a re-run's time before).  The key (:func:`translation_key`) covers
the file's bytes and path, the target and its options, the include folders and the bytes of every
header the file reaches through them (the translator reads them), porter's own code and the target
backend's files: any edit is a new translation, never a stale one.

Beside the translation, the record keeps what a port reads from the *original* file's scan -- where
its kernels are defined and which kernel instances it launches -- so a remembered file is not
scanned either.  Records live in porter's content-addressed cache (:mod:`porter.cache`, namespace
``translations``; ``--no-cache`` turns it off).  A record that does not decode is a miss.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from porter.cache import Cache, backend_fingerprint
from porter.model import Diagnostic, Severity, TranslatedKernel, Translation

NAMESPACE = "translations"
FORMAT = 1


@dataclass(frozen=True)
class Facts:
    """What a port needs of the original file's scan: each kernel's (name, line) where it is defined,
    and each kernel instance its launches name, as (name, kernel, template arguments)."""

    kernels: tuple[tuple[str, int], ...] = ()
    instances: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


def translation_key(
    target: str,
    data: bytes,
    path: str,
    include_dirs: Sequence[str],
    options: Mapping[str, str] | None,
) -> str:
    from porter.includes import reachable
    from porter.workflows.resume import code_fingerprint

    parts: list[str | bytes] = [
        f"translation/{FORMAT}",
        code_fingerprint(),
        target,
        backend_fingerprint(target),
        os.path.abspath(path),
        json.dumps(sorted((options or {}).items())),
        "\0".join(include_dirs),
        data,
    ]
    # every header the file reaches (its own folder first, then the include folders), path and bytes
    for header, text in list(reachable([(path, data)], include_dirs))[1:]:
        parts += [os.path.abspath(header), text]
    return Cache.key(*parts)


def recall(key: str, cache: Cache | None = None) -> tuple[Translation, Facts] | None:
    raw = (cache or Cache()).get(NAMESPACE, key)
    if raw is None:
        return None
    try:
        return _decode(json.loads(raw))
    except (ValueError, KeyError, TypeError):
        return None


def remember(key: str, translation: Translation, facts: Facts, cache: Cache | None = None) -> None:
    doc = {"translation": dataclasses.asdict(translation), "facts": dataclasses.asdict(facts)}
    # ensure_ascii: a user's non-UTF-8 byte (kept as a surrogate escape) survives as a \\udcXX escape
    (cache or Cache()).put(NAMESPACE, key, json.dumps(doc, ensure_ascii=True).encode("ascii"))


def _decode(doc: dict[str, Any]) -> tuple[Translation, Facts]:
    t = doc["translation"]
    kernels = tuple(
        TranslatedKernel(
            name=k["name"],
            entry=k["entry"],
            target=k["target"],
            arg_map=tuple(k["arg_map"]),
            extra_args=tuple(k["extra_args"]),
            untranslatable=tuple(k["untranslatable"]),
            requires=tuple(k["requires"]),
        )
        for k in t["kernels"]
    )
    diagnostics = tuple(
        Diagnostic(
            d["path"], int(d["line"]), d["construct"], d["reason"], Severity(d["severity"]), d.get("code", "")
        )
        for d in t["diagnostics"]
    )
    translation = Translation(t["source_path"], t["target"], t["text"], kernels, diagnostics)
    f = doc["facts"]
    facts = Facts(
        tuple((str(n), int(line)) for n, line in f["kernels"]),
        tuple((str(n), str(b), tuple(str(a) for a in args)) for n, b, args in f["instances"]),
    )
    return translation, facts


__all__ = ["Facts", "recall", "remember", "translation_key"]
