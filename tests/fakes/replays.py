"""Hand-written captures and the CPU emulator's verdicts on them, for the replay tests: each capture is
written as docs/CAPTURE_FORMAT.md describes it, so what the program "left" is chosen by the test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CompileOptions

from porter import capture
from porter.harness import replay
from porter.harness.trial import ValidateOptions
from porter.model import Variant, Verdict
from porter.plan import run_devices

DTYPES = {"float32": ("float*", "float", 4), "int32": ("int*", "int", 4)}


def by_hand(folder: Path, kernel: str, launches: list[dict]) -> list[capture.Launch]:
    """A capture folder of `launches` of `kernel`: each a dict with ``grid``, ``block`` and ``args``, a
    list of ("ptr", before, after) for an array argument (its own allocation) or ("int", value)."""
    (folder / "arrays").mkdir(parents=True)
    (folder / "launches").mkdir()
    for n, la in enumerate(launches, 1):
        args, allocations = [], []
        for i, a in enumerate(la["args"]):
            if a[0] == "int":
                hexed = np.int32(a[1]).tobytes().hex()
                args.append(
                    {"index": i, "ctype": "int", "kind": "scalar", "dtype": "int32", "bytes": 4, "hex": hexed}
                )
                continue
            before, after = a[1], a[2]
            ctype, element, size = DTYPES[before.dtype.name]
            k = len(allocations)
            names = [f"arrays/l{n}-a{k}-{w}.bin" for w in ("before", "after")]
            (folder / names[0]).write_bytes(before.tobytes())
            (folder / names[1]).write_bytes(after.tobytes())
            allocations.append({"index": k, "bytes": before.nbytes, "before": names[0], "after": names[1]})
            args.append({"index": i, "ctype": ctype, "kind": "pointer", "element": element, "element_bytes": size,
                         "dtype": before.dtype.name, "const": False, "allocation": k, "offset": 0})  # fmt: skip
        record = {
            "kernel": kernel, "kernel_index": 0, "launch": n, "sequence": n, "grid": [la["grid"], 1, 1],
            "block": [la["block"], 1, 1], "shared_bytes": 0, "stream": None, "args": args,
            "allocations": allocations, "status": 0,
        }  # fmt: skip
        (folder / "launches" / f"k0-s{n}.json").write_text(json.dumps(record))
    capture.finish(folder, "./prog", 1, 0)
    return capture.load(folder).launches


def cpu_emulators() -> list:
    devices = [d for d in run_devices("cuda") if d.backend == "cpu"]
    if not devices:
        pytest.skip("the CPU emulator is not available here")
    return devices


def original(source: str, entry: str) -> replay.Original:
    return replay.Original(
        Variant(entry, "cuda", source, entry, "original"), CompileOptions(), tuple(cpu_emulators())
    )


def judge(source: str, entry: str, rep: replay.Replay, provenance: str = "user") -> Verdict:
    (verdict,) = replay.replay(
        Variant(entry, "cuda", source, entry, provenance), rep, cpu_emulators(), ValidateOptions()
    )
    return verdict
