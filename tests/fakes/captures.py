"""A capture folder made in Python as the runtime writes one (docs/CAPTURE_FORMAT.md): launches of
``scale(float* x, float a, int n)`` -- ``x[i] *= a`` with a = 0.5 and n = 4 -- each with its arrays, then
:func:`porter.capture.finish` adds the manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from porter import capture

KERNEL = """__global__ void scale(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a;
}
"""

BEFORE = np.array([1, 2, 3, 4], dtype=np.float32)


def record(launch: int = 1, sequence: int = 0) -> dict[str, Any]:
    """`scale(x, 0.5f, 4)` as the runtime records it: x is allocation 0, before and after."""
    stem = f"arrays/k0-{launch}-a0"
    return {
        "kernel": "scale",
        "kernel_index": 0,
        "launch": launch,
        "sequence": sequence,
        "grid": [1, 1, 1],
        "block": [4, 1, 1],
        "shared_bytes": 0,
        "stream": None,
        "status": 0,
        "args": [
            {
                "index": 0,
                "ctype": "float*",
                "kind": "pointer",
                "element": "float",
                "element_bytes": 4,
                "dtype": "float32",
                "const": False,
                "allocation": 0,
                "offset": 0,
            },
            {
                "index": 1,
                "ctype": "float",
                "kind": "scalar",
                "dtype": "float32",
                "bytes": 4,
                "hex": np.float32(0.5).tobytes().hex(),
            },
            {
                "index": 2,
                "ctype": "int",
                "kind": "scalar",
                "dtype": "int32",
                "bytes": 4,
                "hex": np.int32(4).tobytes().hex(),
            },
        ],
        "allocations": [
            {"index": 0, "bytes": 16, "before": f"{stem}-before.bin", "after": f"{stem}-after.bin"}
        ],
    }


def make(folder: Path, records: int = 2) -> Path:
    (folder / "launches").mkdir(parents=True)
    (folder / "arrays").mkdir()
    for n in range(1, records + 1):
        doc = record(n, n - 1)
        (folder / "launches" / f"k0-s{n - 1}.json").write_text(json.dumps(doc))
        alloc = doc["allocations"][0]
        before = BEFORE * np.float32(n)  # launch n: x = [n, 2n, 3n, 4n], then halved by the kernel
        (folder / alloc["before"]).write_bytes(before.tobytes())
        (folder / alloc["after"]).write_bytes((before * np.float32(0.5)).tobytes())
    capture.finish(folder, "./main", 1, 0, program="prog", device="cpu:cpu-emulator")
    return folder
