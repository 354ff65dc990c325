"""Temporary: :mod:`porter.redact` under its old name, for porter/workflows/program_run.py alone.

That file is being rewritten by the ProgramPlan work, which imports :mod:`porter.redact` instead;
delete this module then.  Nothing else may import it: tests/unit/test_imports.py fails on a new
importer, and once program_run.py no longer imports it, until it is deleted.
"""

from porter.redact import redact

__all__ = ["redact"]
