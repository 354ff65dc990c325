"""Runs at another warp width (issue #35): a line that only reports the width is the device's property."""

from __future__ import annotations

from porter.harness.outputs import RunOutput, compare, width_lines


def _out(text: str) -> RunOutput:
    return RunOutput(exit=0, stdout=text)


def test_only_lines_naming_the_width_that_agree_once_it_is_swapped_are_left_out() -> None:
    original = _out("Warp size: 32\nlanes per warp 32, blocks 4\nwarp 0 counted 32 positives\nresult 32\n")
    wide = _out("Warp size: 64\nlanes per warp 64, blocks 4\nwarp 0 counted 64 positives\nresult 64\n")
    named = width_lines(original, wide, (32, 64))
    assert named.numbers == (1, 2)  # a count per warp and a result that name no width: compared
    assert compare(original, wide, varies=named) == [
        "stdout line 3: original 'warp 0 counted 32 positives', port 'warp 0 counted 64 positives'",
        "stdout line 4: original 'result 32', port 'result 64'",
    ]
    # a line naming warps whose other numbers differ too is a difference, not the device's property
    other = _out("Warp size: 64\nlanes per warp 64, blocks 5\nwarp 0 counted 64 positives\nresult 32\n")
    assert width_lines(original, other, (32, 64)).numbers == (1,)
