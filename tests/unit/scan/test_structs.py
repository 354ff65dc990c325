"""porter.scan.structs: structs whose fields are one scalar type, through the aliases programs use."""

from __future__ import annotations

from porter.scan.structs import Lanes, homogeneous_structs


def test_fields_of_one_type_through_a_macro_or_a_typedef_and_arrays_count_as_lanes() -> None:
    found = homogeneous_structs(
        [
            "#define fp double\n"
            "typedef float real_t;\n"
            "typedef struct { fp v, x, y, z; } FOUR;\n"
            "struct Seg { real_t a[2]; real_t b; };\n"
            "typedef struct Cell { unsigned int id; unsigned n[3]; } CellT;\n"
        ]
    )
    assert found["FOUR"] == Lanes("float64", 4)
    assert found["Seg"] == Lanes("float32", 3)
    assert found["Cell"] == found["CellT"] == Lanes("uint32", 4)


def test_mixed_fields_methods_pointers_and_unknown_extents_are_not_lanes() -> None:
    found = homogeneous_structs(
        [
            "struct Mixed { int n; float w; };\n"
            "struct Method { float x; float len() const { return x; } };\n"
            "struct Pointer { float* data; float x; };\n"
            "#define N 4\nstruct Sized { float v[N]; };\n"
            "struct Nested { struct { float a; } inner; float b; };\n"
        ]
    )
    assert not set(found) & {"Mixed", "Method", "Pointer", "Sized", "Nested"}


def test_a_name_two_files_define_differently_is_left_out() -> None:
    assert "P" not in homogeneous_structs(["struct P { float x, y; };", "struct P { double x, y; };"])
    assert homogeneous_structs(["struct P { float x, y; };", "struct P { float x, y; };"])["P"] == Lanes(
        "float32", 2
    )
