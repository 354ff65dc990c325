"""Memory and race checkers a backend declares: compute-sanitizer passes on an NVIDIA GPU, and the
findings of a checker device (Oclgrind) read from its log in the job's scratch folder."""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import replace

import numpy as np

from porter.backends import CheckerFinding, Device, get_backend
from porter.backends.isolate import Job, JobResult, run_job
from porter.cache import Cache
from porter.harness.trial import Instance, Reject, ValidateOptions, make_job, tail
from porter.model import KernelSpec, Variant

# Checker logs are written in the job's scratch folder, the only place a sandboxed child may write.
CHECKER_LOG = "checker.log"


SANITIZER_LOG = "sanitizer.log"


def sanitizer_pass(
    variant: Variant,
    spec: KernelSpec,
    device: Device,
    inst: Instance,
    opts: ValidateOptions,
    logs: list[str],
    static_shared: int | None = None,
) -> list[str]:
    """compute-sanitizer memcheck and racecheck on an NVIDIA GPU; the names of the passes run.  A pass that
    can find nothing in this launch is not run, and the log says why (racecheck, when the kernel's build has
    no static shared memory -- `static_shared`, from the compiler's report; None: not known -- and the launch
    no dynamic shared memory).

    The passes run side by side (each in its own child, as every job does).  A pass's finding on the
    same kernel build, inputs, geometry and device is remembered in porter's cache (namespace
    ``sanitizer``): the checker is deterministic there, so an unchanged kernel re-validated on the same
    captured launch is not checked again."""
    from concurrent.futures import ThreadPoolExecutor

    from porter.backends.cuda import sanitizer

    tool = sanitizer.tool()
    if tool is None:
        logs.append("memcheck skipped: compute-sanitizer not found")
        return []
    cache = Cache()
    jobs: dict[str, tuple[Job, str]] = {}
    found: dict[str, tuple[int, str, str]] = {}  # check -> (errors, first error, log tail)
    for check in sanitizer.PASSES:
        wrapper = sanitizer.wrapper(tool, check, "{scratch}/" + SANITIZER_LOG)
        job, _ = make_job(variant, spec, device, inst, 1, opts.compile, inst.seed, wrapper)
        why = sanitizer.pointless(check, static_shared, job.shared_bytes)
        if why:
            logs.append(f"{check} not run: {why}")
            continue
        key = _sanitizer_key(check, tool, job)
        known = cache.get(SANITIZER_NAMESPACE, key)
        if known is not None:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                doc = json.loads(known)
                found[check] = (int(doc["errors"]), str(doc["first"]), str(doc["log"]))
                continue
        jobs[check] = (replace(job, collect=(SANITIZER_LOG,)), key)
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        results = dict(
            zip(jobs, pool.map(lambda jk: run_job(jk[0], opts.timeout_s * 10), jobs.values()), strict=True)
        )
    for check, res in results.items():
        text = res.files.get(SANITIZER_LOG, "")
        if not res.ok and res.stage in ("timeout", "unavailable"):
            logs.append(f"{check} did not complete ({res.stage}): {res.error}")
            continue
        errors = sanitizer.error_count(text, check)
        if errors is None:
            logs.append(f"{check}: no summary in the compute-sanitizer log\n{tail(text + res.log)}")
            continue
        found[check] = (errors, sanitizer.first_error(text), tail(text))
        doc = {"errors": errors, "first": found[check][1], "log": found[check][2]}
        cache.put(SANITIZER_NAMESPACE, jobs[check][1], json.dumps(doc).encode())
    done: list[str] = []
    for check in sanitizer.PASSES:
        if check not in found:
            continue
        errors, first, log = found[check]
        if errors:
            raise Reject(check, f"compute-sanitizer {check}: {errors} error(s) at {inst.label}: {first}", log)
        done.append(check)
    return done


SANITIZER_NAMESPACE = "sanitizer"


def _sanitizer_key(check: str, tool: str, job: Job) -> str:
    """What a pass's finding depends on: the checker, the kernel's build, its inputs, geometry and device."""
    h = hashlib.sha256()
    for a in job.args:
        if isinstance(a, np.ndarray):
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        else:
            h.update(repr(a).encode())
    for name, value in sorted(job.symbols.items()):
        h.update(name.encode())
        h.update(np.ascontiguousarray(value).tobytes())
    device = job.device
    from porter.cache import headers_digest

    try:
        chain = get_backend(job.backend).toolchain_id(device)  # compiler and its version, driver
    except Exception:  # noqa: BLE001 - a toolchain that cannot say: the key says so too
        chain = "unknown"
    return Cache.key(
        "sanitizer", check, tool, job.backend, job.source, job.entry, repr(job.options),
        headers_digest(job.source, job.options.include_dirs), chain,
        repr((job.grid, job.block, job.shared_bytes, job.runs)), h.hexdigest(),
        "" if device is None else f"{device.label}|{device.arch}|{device.driver}",
    )  # fmt: skip


def checker_findings(device: Device, res: JobResult) -> list[CheckerFinding]:
    text = res.files.get(CHECKER_LOG, "")
    return get_backend(device.backend).checker_findings(device, text + "\n" + res.log)
