"""porter.scan.timers' device properties: the lines a program prints from a property of its device
(``cudaGetDeviceProperties``' fields, ``cudaMemGetInfo``...), found in its source as timers are; and lines that one
print statement begins and the next ends (``printf("\\nCUDA ver - %d.%d", ...)`` then ``printf("\\nClock...")``,
Rodinia's style) are whole lines of the two joined."""

from __future__ import annotations

import re

from porter.scan.timers import PrintedTimer, printed_properties, printed_timers

DEVICE_REPORT = r"""#include <cstdio>
void show(int dev) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
        printf("\nboard \t - %s ", p.name);
        printf("\n-----------------------");
        printf("\nfamily \t\t - %d.%d", p.major, p.minor);   // ended by the next print's newline
        printf("\nunits \t\t - %d\n\n", p.multiProcessorCount);
    }
    size_t spare = 0, all = 0;
    cudaMemGetInfo(&spare, &all);
    printf("spare memory %zu of %zu\n", spare, all);
    int width = p.warpSize;
    printf("width %d\n", width);
}
int main() {
    show(0);
    float sum = 2.5f;
    printf("\nsum %f", sum);
    printf("\n");
    return 0;
}
"""


def _found(source: str) -> dict[str, PrintedTimer]:
    """The print statements found, by the value they print."""
    return {t.what: t for t in printed_properties([("prog.cu", source.encode())])}


def _line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def _matches(found: PrintedTimer, line: str) -> bool:
    return re.fullmatch(found.pattern, line, re.S) is not None


def test_the_fields_of_the_device_properties_printed_are_found_with_their_lines() -> None:
    found = _found(DEVICE_REPORT)
    assert set(found) == {"p.name", "p.major", "p.multiProcessorCount", "spare", "width"}
    family = found["p.major"]
    assert family.line == _line_of(DEVICE_REPORT, "family") and family.file == "prog.cu"
    # the line the two prints make, whatever the device says
    assert _matches(family, "family \t\t - 8.0") and _matches(family, "family \t\t - 9.0")
    assert not _matches(family, "family \t\t - 9.0 extra")
    assert _matches(found["p.multiProcessorCount"], "units \t\t - 132")
    assert _matches(found["spare"], "spare memory 1024 of 4096")
    assert _matches(found["width"], "width 64")  # through a variable assigned a field
    assert found["p.name"].line == _line_of(DEVICE_REPORT, "board")


def test_a_result_printed_the_same_way_is_not_a_property() -> None:
    found = _found(DEVICE_REPORT)
    assert not any(_matches(f, "sum 2.500000") for f in found.values())
    assert "sum" not in found


def test_a_line_begun_by_one_print_and_not_ended_by_the_next_statement_is_not_whole() -> None:
    source = (
        "#include <cstdio>\nint main() {\n    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);\n"
        '    printf("\\nfamily - %d.%d", p.major, p.minor);\n'
        "    int n = 3;\n"  # not a print: what follows the family line is not known here
        '    printf(" items %d\\n", n);\n'
        "    return 0;\n}\n"
    )
    assert _found(source) == {}


def test_timers_printed_in_that_style_are_found_too() -> None:
    source = (
        "#include <cstdio>\nint main() {\n    cudaEvent_t a, b; float ms = 0;\n"
        "    cudaEventElapsedTime(&ms, a, b);\n"
        '    printf("\\nkernel time \\t - %f ms", ms);\n'
        '    printf("\\nblocks \\t - %d\\n", 4);\n'
        "    return 0;\n}\n"
    )
    (timer,) = printed_timers([("prog.cu", source.encode())])
    assert timer.what == "ms" and timer.line == _line_of(source, "kernel time")
    assert re.fullmatch(timer.pattern, "kernel time \t - 0.125000 ms")
    # and a timer is not a property of the device, nor the other way round
    assert printed_properties([("prog.cu", source.encode())]) == ()
    assert printed_timers([("prog.cu", DEVICE_REPORT.encode())]) == ()
