"""A kernel's parameter list holding preprocessor conditionals, translated to OpenCL: the directives are
kept in the .cl kernel and in the host stub (each side's preprocessor takes the same branch), the launch
mapping counts the parameters the program's own macros leave in, and a conditional porter cannot decide
is refused naming its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from porter.backends.opencl.host import host_text
from porter.backends.opencl.translate import translate_to_opencl

from porter.model import Severity

KERNEL = """\
__global__ void encode(const unsigned int* in,
#ifdef FLAG
                       unsigned int* trace, int stride,
#endif
                       unsigned int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 3u;
}
"""


def _translate(tmp_path: Path, source: str, **kw: object):  # type: ignore[no-untyped-def]
    path = tmp_path / "k.cu"
    path.write_text(source)
    return translate_to_opencl(source, str(path), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prefix", "kw", "mapped"),
    [
        ("#define FLAG\n", {}, 5),  # defined above, in the file
        ("", {"defines": ("FLAG",), "command_line_known": True}, 5),  # defined by -D
        ("", {"command_line_known": True}, 3),  # defined nowhere: the build leaves it undefined
        ("#define FLAG\n#undef FLAG\n", {}, 3),
    ],
)
def test_the_signature_keeps_the_conditional_and_maps_the_live_parameters(
    tmp_path: Path, prefix: str, kw: dict[str, object], mapped: int
) -> None:
    tr = _translate(tmp_path, prefix + KERNEL, **kw)
    (k,) = tr.kernels
    assert not k.untranslatable, k.untranslatable
    assert k.arg_map == tuple(range(mapped))
    text = tr.text
    start = text.index("__kernel void encode(")
    signature = text[start : text.index("{", start)]
    assert signature.splitlines() == [
        "__kernel void encode(__global const unsigned int* in,",
        "#ifdef FLAG",
        "                       __global unsigned int* trace, int stride,",
        "#endif",
        "                       __global unsigned int* out, int n)",
    ]
    assert not [d for d in tr.diagnostics if d.severity == Severity.ERROR]


def test_an_else_branch_maps_the_parameters_of_the_branch_taken(tmp_path: Path) -> None:
    source = KERNEL.replace("#endif", "#else\n                       float* other,\n#endif")
    taken = _translate(tmp_path, "#define FLAG 1\n" + source)
    other = _translate(tmp_path, source, command_line_known=True)
    assert taken.kernels[0].arg_map == (0, 1, 2, 3, 4)
    assert other.kernels[0].arg_map == (0, 1, 2, 3)
    assert "#else\n                       __global float* other," in other.text


@pytest.mark.parametrize(
    "condition",
    ["#if FLAG_LEVEL > 2", "#ifdef FLAG"],  # a comparison; a macro the command line may define
)
def test_an_undecidable_conditional_is_refused_with_its_file_and_line(tmp_path: Path, condition: str) -> None:
    source = "// a comment line\n" + KERNEL.replace("#ifdef FLAG", condition)
    tr = _translate(tmp_path, source)  # the command line is not known
    (k,) = tr.kernels
    assert k.untranslatable and condition in k.untranslatable[0]
    assert "cannot decide" in k.untranslatable[0]
    (err,) = [d for d in tr.diagnostics if d.severity == Severity.ERROR]
    assert (Path(err.path).name, err.line, err.construct) == ("k.cu", 3, condition)
    assert "\n" not in err.reason
    assert "__kernel void encode" not in tr.text


def test_a_conditional_in_an_included_header_is_decided_by_the_macros_above_it(tmp_path: Path) -> None:
    (tmp_path / "config.h").write_text("#ifndef CONFIG_H\n#define CONFIG_H\n#define FLAG\n#endif\n")
    (tmp_path / "kernel.cuh").write_text(KERNEL)
    source = '#include "config.h"\n#include "kernel.cuh"\n'
    tr = _translate(tmp_path, source, command_line_known=True)
    assert tr.kernels[0].arg_map == (0, 1, 2, 3, 4)
    assert "#ifdef FLAG" in tr.text


def test_the_host_stub_sets_the_arguments_under_the_same_directives(tmp_path: Path) -> None:
    tr = _translate(tmp_path, "#define FLAG\n" + KERNEL)
    host = host_text(KERNEL, {"encode": [(tr.kernels[0], "k.cl")]})
    assert host.splitlines()[:12] == [
        *KERNEL.splitlines()[:6],
        '    porter_opencl::Launch porter_launch("encode", "k.cl");',
        "    porter_launch.arg(in);",
        "#ifdef FLAG",
        "    porter_launch.arg(trace).arg(stride);",
        "#endif",
        "    porter_launch.arg(out).arg(n).run();",
    ]


def test_a_directive_quoted_in_a_diagnostic_is_shown_as_its_words(tmp_path: Path) -> None:
    source = KERNEL.replace("unsigned int* trace, int stride,", "unsigned int** trace, int stride,")
    tr = _translate(tmp_path, "#define FLAG\n" + source)
    assert tr.kernels[0].untranslatable  # a pointer to a pointer: OpenCL cannot pass one
    assert "porter:pp" not in tr.text and all("porter:pp" not in d.construct for d in tr.diagnostics)
