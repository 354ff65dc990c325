"""porter.sandbox.jail: what a jailed program build or run is shown of this machine (bubblewrap's
arguments; the jailed runs themselves are in tests/security/test_program_jail.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from porter import sandbox
from porter.sandbox import jail


def _pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_a_run_sees_the_system_its_copy_and_the_data_named_not_the_whole_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LD_LIBRARY_PATH", "CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "HIP_PATH", sandbox.DISABLE_ENV):
        monkeypatch.delenv(name, raising=False)
    copy, home, data = tmp_path / "tree", tmp_path / "home", tmp_path / "data"
    for folder in (copy, home, data):
        folder.mkdir()
    args = jail._bwrap_args(
        jail.Jail((str(copy),), readable=(str(data),), home=str(home), gpu=True), str(copy)
    )
    read_only = _pairs(args, "--ro-bind")
    writable = _pairs(args, "--bind")
    assert ("/usr", "/usr") in read_only and ("/etc/ld.so.cache", "/etc/ld.so.cache") in read_only
    sources = {src for src, _ in read_only} | {src for src, _ in writable}
    assert not sources & {"/", "/root", "/home", "/etc", "/tmp", "/var", str(Path.home())}
    assert "/etc/shadow" not in sources and not any(s.startswith(str(Path.home()) + "/") for s in sources)
    assert (str(data), str(data)) in read_only  # --data: read-only
    assert (str(copy), str(copy)) in writable and (str(home), "/tmp") in writable
    assert (
        "--unshare-net" in args
        and "--unshare-pid" in args
        and args[args.index("--dev") : args.index("--dev") + 2] == ["--dev", "/dev"]
    )
    if os.geteuid() == 0:
        assert args[args.index("--cap-drop") + 1] == "ALL"
    # parents are mounted before what lies inside them
    where = [
        args[i + 2]
        for i, a in enumerate(args)
        if a.startswith("--") and a in ("--ro-bind", "--bind", "--symlink")
    ]
    depths = [len(Path(w).parts) for w in where]
    assert depths == sorted(depths)


def test_a_build_also_reads_the_toolchains_but_never_a_home_folder_whole(tmp_path: Path) -> None:
    out = tmp_path / "build"
    out.mkdir()
    (tmp_path / "src").mkdir()
    args = jail._bwrap_args(
        jail.Jail((str(out),), readable=(str(tmp_path / "src"),), toolchain=True), str(out)
    )
    sources = {src for src, _ in _pairs(args, "--ro-bind")}
    assert str(tmp_path / "src") in sources
    assert not sources & {"/", "/root", "/home", "/etc", str(Path.home())}
    assert not any(src.startswith("/dev/nvidia") for src, _ in _pairs(args, "--dev-bind"))  # builds: no GPU


def test_a_stopped_command_says_why() -> None:
    assert jail.Ran(None, 2.0, timed_out=True).reason(2, 1 << 20) == "timed out after 2 s (--timeout)"
    assert (
        jail.Ran(None, 0.1, overflow="stdout").reason(300, 3 << 20)
        == "printed more than 3 MiB to stdout (--max-output): stopped"
    )
    assert jail.Ran(0, 0.1).reason(300, 1 << 20) == ""


def test_the_files_a_program_failed_to_open_are_its_own_not_the_jails_or_the_loaders(tmp_path: Path) -> None:
    """A trace as strace writes it: the jail's setup (before the program's exec), the loader's and the
    locale's look-ups are not the program's missing inputs."""
    trace = tmp_path / "opens.txt"
    trace.write_text(
        '100 execve("/usr/bin/bwrap", ["bwrap", "--"], 0x7ffd /* 9 vars */) = 0\n'
        '101 readlink("/newroot/usr", 0x7ffd, 1023) = -1 ENOENT (No such file or directory)\n'
        '101 openat(AT_FDCWD, "/newroot/opt", O_RDONLY) = -1 ENOENT (No such file or directory)\n'
        '102 execve("./solver", ["./solver", "in.txt"], 0x7ffd /* 9 vars */) = 0\n'
        '102 access("/etc/ld.so.preload", R_OK) = -1 ENOENT (No such file or directory)\n'
        '102 openat(AT_FDCWD, "/usr/lib/locale/C.UTF-8/LC_CTYPE", O_RDONLY) = -1 ENOENT (No such file)\n'
        '102 openat(AT_FDCWD, "libextra.so.1", O_RDONLY) = -1 ENOENT (No such file or directory)\n'
        '102 openat(AT_FDCWD, "in.txt", O_RDONLY) = 3\n'
        '102 openat(AT_FDCWD, "data/mesh \\"b\\".msh", O_RDONLY) = -1 ENOENT (No such file or directory)\n'
        '102 newfstatat(AT_FDCWD, "/home/me/tables.bin", 0x7ffd, 0) = -1 EACCES (Permission denied)\n'
        '102 openat(AT_FDCWD, "data/mesh \\"b\\".msh", O_RDONLY) = -1 ENOENT (No such file or directory)\n'
        "102 +++ exited with 1 +++\n",
        encoding="utf-8",
    )
    assert jail.missing_files(trace, "./solver") == ['data/mesh \\"b\\".msh', "/home/me/tables.bin"]
    assert jail.missing_files(trace, "./other") == []  # that program never started: nothing is its
    assert jail.missing_files(tmp_path / "absent.txt", "./solver") == []


def test_a_call_another_process_interrupted_in_the_trace_still_counts(tmp_path: Path) -> None:
    """On a loaded machine strace splits a call when another traced process runs between its start and
    its end; the program's exec and its failed open are then written in two halves each."""
    trace = tmp_path / "opens.txt"
    trace.write_text(
        '100 execve("/usr/bin/bwrap", ["bwrap", "--"], 0x7ffd /* 9 vars */) = 0\n'
        '102 execve("./solver", ["./solver"], 0x7ffd /* 9 vars */ <unfinished ...>\n'
        '101 openat(AT_FDCWD, "/newroot/opt", O_RDONLY) = -1 ENOENT (No such file or directory)\n'
        "102 <... execve resumed>) = 0\n"
        '102 openat(AT_FDCWD, "values.dat", O_RDONLY <unfinished ...>\n'
        '101 openat(AT_FDCWD, "elsewhere.dat", O_RDONLY) = -1 ENOENT (No such file or directory)\n'
        "102 <... openat resumed>) = -1 ENOENT (No such file or directory)\n"
        '102 openat(AT_FDCWD, "found.dat", O_RDONLY <unfinished ...>\n'
        "102 <... openat resumed>) = 3\n",
        encoding="utf-8",
    )
    assert jail.missing_files(trace, "./solver") == ["values.dat"]


@pytest.mark.skipif(not jail.tracer(), reason="strace is missing here, or cannot trace")
def test_a_jailed_run_watched_by_strace_lists_what_it_did_not_find(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = work / "reader.sh"
    script.write_text("#!/bin/sh\n{ read -r line < settings.ini; } 2>/dev/null || exit 3\n", encoding="utf-8")
    script.chmod(0o755)
    ran = jail.run(
        ["./reader.sh"], jail.Jail((str(work),), home=str(tmp_path / "home")), work,
        stdout=tmp_path / "out.txt", timeout=30, max_output=1 << 16, trace_opens=tmp_path / "opens.txt",
    )  # fmt: skip
    assert ran.exit == 3
    assert jail.missing_files(tmp_path / "opens.txt", "./reader.sh") == ["settings.ini"]
