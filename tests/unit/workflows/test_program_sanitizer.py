"""porter.workflows.program_sanitizer: AddressSanitizer's report of the original's run, in one line, believed
only for memory the program itself owns and with a frame in its own files."""

from __future__ import annotations

from porter.workflows.program_sanitizer import defect

TREE = "/out/build/original/cpu-runtime-asan/src"


def _report(kind: str, frames: list[str], allocated: list[str], region: str = "") -> str:
    lines = [
        "=================================================================",
        f"==4242==ERROR: AddressSanitizer: {kind} on address 0x602000000015 at pc 0x1 bp 0x2 sp 0x3",
        "WRITE of size 4 at 0x602000000015 thread T0",
        *(f"    #{i} 0x55550000{i:04x} in {f}" for i, f in enumerate(frames)),
        "",
        region,
        "allocated by thread T0 here:" if allocated else "",
        *(f"    #{i} 0x55551111{i:04x} in {f}" for i, f in enumerate(allocated)),
        f"SUMMARY: AddressSanitizer: {kind}",
    ]
    return "\n".join(lines) + "\n"


def test_a_write_past_a_heap_allocation_is_named_by_the_users_file_and_line() -> None:
    text = _report(
        "heap-buffer-overflow",
        [
            "memcpy /usr/lib/gcc/asan_interceptors.cpp:90",
            f"fill {TREE}/util/fill.c:12:5",
            f"main {TREE}/main.cu:40",
        ],
        ["malloc /usr/lib/gcc/asan_malloc_linux.cpp:69", f"main {TREE}/main.cu:31"],
        "0x602000000015 is located 1 bytes to the right of 4-byte region [0x602000000010,0x602000000014)",
    )
    assert defect("some output first\n" + text, TREE + "/") == (
        "AddressSanitizer: heap-buffer-overflow, a WRITE of 4 bytes at util/fill.c:12 (in fill), 1 byte past "
        "the end of a 4-byte region allocated at main.cu:31 (in main)"
    )


def test_errors_not_believed_are_not_named() -> None:
    # kernels run on the runtime's fibers, whose stacks AddressSanitizer may misjudge: stack kinds are not believed
    stack = _report("stack-buffer-overflow", [f"kernel {TREE}/k.cu:7"], [])
    assert defect(stack, TREE) == ""
    # an error with no frame in the program's own files is the runtime's, not the program's
    runtime = _report(
        "heap-use-after-free", ["porter_launch /out/build/original/cpu-runtime-asan/porter-include/x.h:3"], []
    )
    assert defect(runtime, TREE) == ""
    assert defect("no sanitizer said anything\n", TREE) == ""
    # a use after free with no region line still names where it happened
    freed = _report("heap-use-after-free", [f"main {TREE}/main.cu:50"], [])
    assert (
        defect(freed, TREE)
        == "AddressSanitizer: heap-use-after-free, a WRITE of 4 bytes at main.cu:50 (in main)"
    )
