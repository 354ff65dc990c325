"""porter.workflows.written: a deliverable is the file on disk.  A file is vouched for only when it holds
exactly the validated bytes; a header before validated code must be plain line comments, whatever the
names in it hold (optimize's header names the model as the user typed it)."""

from __future__ import annotations

from pathlib import Path

from porter.records import Evaluation
from porter.results import REWRITE, Contender
from porter.workflows import written
from porter.workflows.optimize import _header
from porter.workflows.resume import write_atomic

CODE = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"


def test_a_file_is_vouched_for_only_when_it_holds_the_validated_bytes(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    write_atomic(path, CODE)
    assert written.differs(path, CODE) == ""
    path.write_text(CODE.replace("1.0f", "2.0f"))
    assert written.differs(path, CODE) == "k.cu as written differs from the validated text (first at line 1)"
    path.unlink()
    assert "cannot be read back" in written.differs(path, CODE)


def test_a_header_reaches_no_code_whatever_the_names_in_it_hold() -> None:
    assert written.comment_only("// one\n// two\n") == ""
    assert written.comment_only("// one \\\n") and written.comment_only("// a\nint x;\n")
    c = Contender(REWRITE, "rewrite", CODE, Evaluation(True, "done", "validated", max_rel_err=0.0))
    header = _header(c, "openai:evil\nint injected = 1; \\", "best", "k")
    assert written.comment_only(header) == "", header
    assert "int injected" in header  # kept, as a comment
