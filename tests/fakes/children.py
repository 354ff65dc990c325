"""What the harness tests count of the child jobs run (the ``child_jobs`` fixture of tests/unit/harness)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ChildJobs:
    """The child jobs run meanwhile, each as the number of further launches it carried (Job.sets); with
    ``fail_together``, a job carrying some comes back as a crashed child, without running."""

    sets: list[int] = field(default_factory=list)
    fail_together: bool = False
