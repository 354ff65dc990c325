"""--toolchains takes a toolchain's name or its family (issue #30: `opencl` names every OpenCL device's)."""

from __future__ import annotations

import pytest

from porter.errors import UsageError
from porter.workflows.program_run import check_toolchains


def test_a_family_and_a_name_are_both_accepted() -> None:
    check_toolchains(["cpu-runtime"], ["hip"])
    check_toolchains(["opencl"], ["opencl"])  # the family, whatever devices are here


def test_an_unknown_name_is_refused_naming_the_choices() -> None:
    with pytest.raises(UsageError) as err:
        check_toolchains(["bogus"], ["opencl"])
    assert "unknown program toolchain(s) bogus" in str(err.value) and "cpu-runtime" in str(err.value)
