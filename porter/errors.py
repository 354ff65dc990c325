"""User-facing errors: one clear line, naming the file and line where there is one, and an exit code."""

from __future__ import annotations


class PorterError(Exception):
    """An error the CLI prints as one line (``porter: <message>``) and exits with ``exit_code``."""

    exit_code = 1

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, exit_code: int | None = None
    ):
        self.path = path
        self.line = line
        if exit_code is not None:
            self.exit_code = exit_code
        where = f"{path}:{line}: " if path and line else f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


class UsageError(PorterError):
    """Bad arguments or unusable input (exit code 2)."""

    exit_code = 2


class NoKernelError(UsageError):
    """A CUDA source defines no ``__global__`` kernel itself (its kernels may live in a header it
    includes, or it is host code): a single-file port has nothing to validate; a program port takes it."""


def too_deeply_nested(path: str | None, line: int | None = None) -> UsageError:
    """The error for input nested deeper than porter's recursive tree walks go (Python's recursion
    limit): raise it ``from None`` in place of the RecursionError."""
    return UsageError(
        "too deeply nested for porter to read (expressions or blocks nested beyond Python's recursion "
        "limit); flatten the nesting",
        path=path,
        line=line,
    )
