"""The seccomp filter holds on every thread of the child, also those started before it was installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from porter import sandbox
from porter.sandbox import seccomp

CHILD = textwrap.dedent(
    """
    import errno, socket, sys, threading
    from porter.sandbox import seccomp

    ready, go, done = threading.Event(), threading.Event(), {}

    def early():  # a runtime's worker: started before the filter, runs untrusted code after it
        ready.set()
        go.wait()
        try:
            socket.socket()
            done["early"] = "socket opened"
        except OSError as err:
            done["early"] = errno.errorcode.get(err.errno, str(err.errno))

    t = threading.Thread(target=early)
    t.start()
    ready.wait()
    seccomp.install()
    go.set()
    t.join()
    try:
        socket.socket()
        done["main"] = "socket opened"
    except OSError as err:
        done["main"] = errno.errorcode.get(err.errno, str(err.errno))
    print(done["early"], done["main"])
    """
)


def test_a_thread_started_before_the_filter_is_filtered_too() -> None:
    why = seccomp.available()
    if why:
        pytest.skip(f"seccomp unavailable here: {why}")
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["EPERM", "EPERM"]


def test_a_job_child_run_as_root_keeps_no_capability(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("porter runs as an ordinary user here: there are no capabilities to drop")
    why = sandbox._bwrap_works()
    if why:
        pytest.skip(f"bubblewrap cannot work here: {why}")
    cmd, plan = sandbox.wrap_command(
        ["/bin/grep", "^CapEff", "/proc/self/status"], sandbox.Plan(str(tmp_path))
    )
    assert plan.in_bubblewrap
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[1], 16) == 0, proc.stdout
