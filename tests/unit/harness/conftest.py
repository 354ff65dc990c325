"""Fixtures of the harness tests."""

from __future__ import annotations

import pytest
from fakes.children import ChildJobs
from porter.backends import isolate
from porter.backends.isolate import Job, JobResult


@pytest.fixture
def child_jobs(monkeypatch: pytest.MonkeyPatch) -> ChildJobs:
    seen = ChildJobs()
    real = isolate.run_job

    def counted(job: Job, timeout_s: float = 60.0) -> JobResult:
        seen.sets.append(len(job.sets))
        if seen.fail_together and job.sets:
            return JobResult(ok=False, stage="crash", error="killed by SIGSEGV")
        return real(job, timeout_s)

    monkeypatch.setattr(isolate, "run_job", counted)
    return seen
