"""Finding the kernel's fenced code block in a reply."""

from __future__ import annotations

import pytest

from porter.llm.replies import accepted_labels, code_blocks, extract_code, missing_code_reason

KERNEL = "__global__ void k(float* a) {\n  a[threadIdx.x] = 0.0f;\n}\n"


@pytest.mark.parametrize("label", ["cuda", "cpp", "c++", "c", "hip", "opencl", "cl", "", "CUDA", "Cpp"])
def test_accepted_labels(label: str) -> None:
    block = extract_code(f"Here:\n```{label}\n{KERNEL}```\nDone.")
    assert block is not None
    assert block.code == KERNEL and block.language == label.lower() and block.line == 2


def test_tilde_fences_and_info_strings() -> None:
    block = extract_code(f"~~~cuda title=kernel.cu\n{KERNEL}~~~")
    assert block is not None and block.language == "cuda" and block.code == KERNEL
    block = extract_code(f"```{{.hip}}\n{KERNEL}```")
    assert block is not None and block.language == "hip"


@pytest.mark.parametrize("label", ["python", "bash", "text", "json"])
def test_other_labels_are_not_a_kernel(label: str) -> None:
    reply = f"```{label}\nprint(1)\n```"
    assert extract_code(reply) is None
    reason = missing_code_reason(reply)
    assert reason is not None and f"labelled {label}" in reason


def test_no_block() -> None:
    reply = "I think you should use shared memory. __global__ void k() {}"
    assert extract_code(reply) is None and code_blocks(reply) == []
    assert missing_code_reason(reply) == (
        "Your reply had no fenced code block. Reply with the complete kernel in one fenced code block."
    )


def test_largest_block_wins_over_a_trailing_snippet() -> None:
    reply = f"Old line:\n```cuda\na[i] = 0;\n```\nFull kernel:\n```cuda\n{KERNEL}```\nLaunch:\n```cpp\nk<<<1, 32>>>(a);\n```\n"
    block = extract_code(reply)
    assert block is not None and block.code == KERNEL and block.line == 6


def test_equal_sizes_pick_the_later_block() -> None:
    block = extract_code("```c\nint a;\n```\n```c\nint b;\n```")
    assert block is not None and block.code == "int b;\n"


def test_unclosed_block_is_never_returned() -> None:
    reply = (
        f"```cuda\n{KERNEL}```\nand the improved version:\n```cuda\n__global__ void k2(float* a) {{\n  a[0] ="
    )
    block = extract_code(reply)
    assert block is not None and block.code == KERNEL  # the complete one
    cut = "```cuda\n__global__ void k(float* a) {\n"
    assert extract_code(cut) is None
    assert code_blocks(cut)[0].complete is False
    assert "never closed" in (missing_code_reason(cut) or "")


def test_longer_fence_holds_shorter_fences() -> None:
    inner = "// example:\n// ```\n```\nstill inside\n"
    block = extract_code(f"````cuda\n{inner}````")
    assert block is not None and block.code == inner


def test_closing_fence_must_match_character_and_length() -> None:
    block = extract_code("~~~~c\nint a;\n~~~\n```\nint b;\n~~~~")
    assert block is not None and block.code == "int a;\n~~~\n```\nint b;\n"


def test_indented_fence_is_dedented() -> None:
    block = extract_code("1. The kernel:\n   ```cuda\n   int a;\n     int b;\n   ```\n")
    assert block is not None and block.code == "int a;\n  int b;\n"


def test_empty_block_is_not_a_kernel() -> None:
    assert extract_code("```cuda\n```") is None
    assert "empty" in (missing_code_reason("```cuda\n\n```") or "")


def test_inline_backticks_are_not_fences() -> None:
    assert extract_code("Use ```cuda``` style fences") is None


def test_reason_is_none_when_a_kernel_is_found() -> None:
    assert missing_code_reason(f"```\n{KERNEL}```") is None
    assert {"cuda", "cu", "cpp", "c++", "c", "hip", "opencl", "cl", ""} <= accepted_labels()
