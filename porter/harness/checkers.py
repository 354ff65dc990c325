"""Memory and race checkers a backend declares: compute-sanitizer passes on an NVIDIA GPU, and the
findings of a checker device (Oclgrind) read from its log in the job's scratch folder."""

from __future__ import annotations

from dataclasses import replace

from porter.backends import CheckerFinding, Device, get_backend
from porter.backends.isolate import JobResult, run_job
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
) -> list[str]:
    """compute-sanitizer memcheck and racecheck on an NVIDIA GPU; the names of the passes run."""
    from porter.backends.cuda import sanitizer

    tool = sanitizer.tool()
    if tool is None:
        logs.append("memcheck skipped: compute-sanitizer not found")
        return []
    done: list[str] = []
    for check in sanitizer.PASSES:
        wrapper = sanitizer.wrapper(tool, check, "{scratch}/" + SANITIZER_LOG)
        job, _ = make_job(variant, spec, device, inst, 1, opts.compile, inst.seed, wrapper)
        res = run_job(replace(job, collect=(SANITIZER_LOG,)), opts.timeout_s * 10)
        text = res.files.get(SANITIZER_LOG, "")
        if not res.ok and res.stage in ("timeout", "unavailable"):
            logs.append(f"{check} did not complete ({res.stage}): {res.error}")
            continue
        errors = sanitizer.error_count(text, check)
        if errors is None:
            logs.append(f"{check}: no summary in the compute-sanitizer log\n{tail(text + res.log)}")
            continue
        if errors:
            first = sanitizer.first_error(text)
            raise Reject(
                check, f"compute-sanitizer {check}: {errors} error(s) at {inst.label}: {first}", tail(text)
            )
        done.append(check)
    return done


def checker_findings(device: Device, res: JobResult) -> list[CheckerFinding]:
    text = res.files.get(CHECKER_LOG, "")
    return get_backend(device.backend).checker_findings(device, text + "\n" + res.log)
