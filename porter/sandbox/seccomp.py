"""The seccomp filter a child installs before it loads code it did not write (libseccomp via pyseccomp).

Denied (EPERM unless said otherwise), for the process -- every thread it already has (the filter is
synchronised to them: ``SCMP_FLTATR_CTL_TSYNC``) and every thread it starts:

* process creation: ``execve``, ``execveat``, ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``
  (threads stay allowed), ``clone3`` (ENOSYS, so the C library falls back to ``clone``, which is filtered);
* sockets of every family (``socket``, ``socketpair``): no network, no talking to local daemons;
* debugging and other processes: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_*``, signals to any
  process but this one (``kill``/``tgkill`` with another pid, ``tkill``);
* the system: ``mount``, ``umount2``, ``pivot_root``, ``chroot``, ``unshare``, ``setns``, ``bpf``, module
  loading, ``kexec``, ``reboot``, swap, ``iopl``/``ioperm``, keyrings, clock setting, ``acct``, quotas;
* ``io_uring_*`` (its requests are not seen by seccomp at all), ``userfaultfd``, ``open_by_handle_at``.

The list is data for the loader below, not a policy anyone edits per target: every backend's child
gets the same filter.
"""

from __future__ import annotations

import errno
import os
from typing import Any

CLONE_THREAD = 0x00010000

DENIED = (
    "execve",
    "execveat",
    "fork",
    "vfork",
    "socket",
    "socketpair",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "tkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "iopl",
    "ioperm",
    "keyctl",
    "add_key",
    "request_key",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "acct",
    "quotactl",
    "sethostname",
    "setdomainname",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
)


class SeccompUnavailable(RuntimeError):
    pass


def _library() -> Any:
    try:
        import pyseccomp
    except ImportError as err:  # the module is a dependency; libseccomp itself may be missing
        raise SeccompUnavailable(f"pyseccomp cannot be imported: {err}") from None
    except OSError as err:
        raise SeccompUnavailable(f"libseccomp cannot be loaded: {err}") from None
    return pyseccomp


def available() -> str:
    """'' when a filter can be built here, else the reason it cannot."""
    try:
        sc = _library()
        sc.SyscallFilter(defaction=sc.ALLOW)
    except SeccompUnavailable as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - a broken libseccomp is "unavailable", with its message
        return f"libseccomp failed: {err}"
    return ""


def install(all_threads: bool = True) -> None:
    """Install the filter on this process -- every thread it has (`all_threads`), else the calling one
    and the threads it starts from now on; irrevocable.  Raises SeccompUnavailable when it cannot."""
    sc = _library()
    deny = sc.ERRNO(errno.EPERM)
    try:
        f = sc.SyscallFilter(defaction=sc.ALLOW)
        # every thread of the process, not only the caller: runtimes (PoCL's workers, CUDA's) start
        # threads before the untrusted code is loaded, and that code may run on them
        if all_threads:
            f.set_attr(sc.Attr.CTL_TSYNC, 1)
        for name in DENIED:
            try:
                f.add_rule(deny, name)
            except (ValueError, RuntimeError, OSError):
                continue  # a call this architecture or libseccomp does not know cannot be made either
        # clone: a new thread (CLONE_THREAD set) is allowed, a new process is not.
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        me = os.getpid()
        for call in ("kill", "tgkill"):
            f.add_rule(deny, call, sc.Arg(0, sc.GT, me))
            f.add_rule(deny, call, sc.Arg(0, sc.LT, me))
        f.load()
    except SeccompUnavailable:
        raise
    except Exception as err:  # noqa: BLE001 - the caller reports the layer as inactive with this reason
        raise SeccompUnavailable(f"the seccomp filter could not be installed: {err}") from None
