"""A unit whose template kernel is launched only from a .cu file it includes (Rodinia huffman's main file
includes scan.cu, which launches prescan<true, false>): the OpenCL translation emits the instances
launched there, takes the included file's scan from the caller where it holds one, and a launch there it
cannot resolve is a warning naming that file and line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from porter.backends.opencl.translate import translate_to_opencl

from porter.model import Severity
from porter.scan import scan_source
from porter.scan.macros import collect
from porter.source import Scanned

KERNELS = """\
#pragma once
template <bool A>
__global__ void k(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = A ? in[i] * 2 : in[i] + 1;
}
"""

HELPERS = """\
#include "kernels.cuh"
static void run_both(const int* in, int* a, int* b, int n)
{
    k<true><<<(n + 63) / 64, 64>>>(in, a, n);
    k<false><<<(n + 63) / 64, 64>>>(in, b, n);
}
"""

MAIN = """\
#include <cstdio>
#include "helpers.cu"
int main() { return 0; }
"""


def _program(tmp_path: Path, helpers: str = HELPERS) -> Path:
    (tmp_path / "kernels.cuh").write_text(KERNELS)
    (tmp_path / "helpers.cu").write_text(helpers)
    main = tmp_path / "main.cu"
    main.write_text(MAIN)
    return main


def test_instances_launched_from_an_included_cu_file_are_emitted(tmp_path: Path) -> None:
    main = _program(tmp_path)
    tr = translate_to_opencl(MAIN, str(main))
    assert [(k.name, k.entry) for k in tr.kernels] == [("k<true>", "k_true"), ("k<false>", "k_false")]
    assert not any(k.untranslatable for k in tr.kernels)
    assert tr.kernels[0].arg_map == (0, 1, 2)
    assert "__kernel void k_true(" in tr.text and "__kernel void k_false(" in tr.text
    assert "not instantiated" not in tr.text


def test_the_callers_scan_of_the_included_file_is_used(tmp_path: Path) -> None:
    main = _program(tmp_path)
    helpers = tmp_path / "helpers.cu"
    macros = collect([(str(main), MAIN.encode())], [])
    # a scan the caller holds: only its launches count (here it saw k<false> only), the file is not scanned
    held = scan_source(HELPERS.replace("k<true>", "k<false>").encode(), str(helpers), "cuda", macros)
    scanned = Scanned(macros, scan_source(MAIN.encode(), str(main), "cuda", macros), ())
    tr = translate_to_opencl(
        MAIN, str(main), scanned=dataclasses.replace(scanned, included=((str(helpers), held),))
    )
    assert [k.name for k in tr.kernels] == ["k<false>"]


def test_an_unresolved_launch_in_an_included_file_names_that_file(tmp_path: Path) -> None:
    helpers = HELPERS.replace("k<false><<<", "k<<<")  # no template arguments: deduction is not followed
    main = _program(tmp_path, helpers)
    tr = translate_to_opencl(MAIN, str(main))
    assert [k.name for k in tr.kernels] == ["k<true>"]
    warned = [d for d in tr.diagnostics if d.severity == Severity.WARNING and "k<...> launch" in d.construct]
    assert [(Path(d.path).name, d.line) for d in warned] == [("helpers.cu", 5)], tr.diagnostics
