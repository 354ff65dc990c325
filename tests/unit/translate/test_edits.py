import pytest

from porter.translate.edits import Edit, apply_edits, line_of


def test_edits_preserve_everything_outside_them():
    src = b'a /* keep */ b "str" c\n'
    out = apply_edits(src, [Edit(0, 1, "A"), Edit(13, 14, "B"), Edit(21, 22, "C")])
    assert out == b'A /* keep */ B "str" C\n'


def test_insertions_at_one_offset_keep_their_order():
    out = apply_edits(b"xy", [Edit(1, 1, "1"), Edit(1, 1, "2"), Edit(0, 1, "X")])
    assert out == b"X12y"


def test_overlapping_edits_are_refused():
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits(b"abcdef", [Edit(0, 3, "x"), Edit(2, 4, "y")])


def test_out_of_range_edit_is_refused():
    with pytest.raises(ValueError, match="out of range"):
        apply_edits(b"abc", [Edit(2, 9, "x")])


def test_line_of():
    assert line_of(b"a\nb\nc", 0) == 1
    assert line_of(b"a\nb\nc", 4) == 3
