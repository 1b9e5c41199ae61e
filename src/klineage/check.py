"""`check`: run the gates on one program against one workload, in order, with the verdict cache in front.
compile -> correctness -> profile; the profile gate runs only on a GPU and only for a correct program."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from klineage.cache import Cache, verdict_key
from klineage.config import Settings, clip, cuda_available, device_name, versions
from klineage.gates import GATES, GateRequest, Verdict, run_gate, verdict_from_result
from klineage.policy import PolicyReport, judge_program
from klineage.program import Program
from klineage.sandbox import GpuTurns, Job, Sandbox, SandboxResult, device_memory_ran_out
from klineage.workload import UserError, Workload


@dataclass(frozen=True)
class CheckReport:
    workload: str
    program: str
    program_hash: str
    device: str
    device_name: str
    target: str
    verdicts: tuple[Verdict, ...]
    cached: tuple[bool, ...] = ()
    versions: dict = field(default_factory=dict)
    policy: PolicyReport | None = None
    # the workload's case derived for the CPU from a full-size get_inputs() (shrink.Shrunk.as_dict), and why none
    # was where one was wanted
    derived_case: dict | None = None
    shrink_note: str = ""

    @property
    def passed(self) -> bool:
        return all(v.status in ("pass", "skip") for v in self.verdicts) and any(v.passed for v in self.verdicts)

    def verdict(self, gate: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.gate == gate), None)

    def functions_run(self) -> set[str] | None:
        """Functions the check ran, as the correctness gate traced them (None when unknown: then every site counts)."""
        correct = self.verdict("correctness")
        if correct is None or not correct.evidence.get("functions_run"):
            return None
        return set(correct.evidence["functions_run"])

    def as_dict(self) -> dict:
        return {
            "workload": self.workload,
            "program": self.program,
            "program_hash": self.program_hash,
            "device": self.device,
            "device_name": self.device_name,
            "target": self.target,
            "passed": self.passed,
            "versions": self.versions,
            "verdicts": [{**v.as_dict(), "cached": c} for v, c in zip(self.verdicts, self.cached)],
            "policy": self.policy.as_dict() if self.policy else None,
            **({"derived_case": self.derived_case} if self.derived_case else {}),
            **({"shrink_note": self.shrink_note} if self.shrink_note else {}),
        }


def resolve_device(device: str | None) -> str:
    if device in (None, "auto"):
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise UserError("--device cuda: no CUDA GPU is visible on this machine (use --device cpu)")
    if device not in ("cpu", "cuda"):
        raise UserError(f"--device {device}: expected cpu or cuda")
    return device


def out_of_device_memory(verdict: Verdict) -> bool:
    """A check that failed or errored because the device's memory ran out (PyTorch's or the child's report)."""
    if verdict.status not in ("fail", "error"):
        return False
    said = f"{verdict.reason} {verdict.evidence.get('log', '')}" if isinstance(verdict.evidence, dict) else ""
    # a host allocation past the sandbox's limit is `oom` too (gates.common.memory_finding): the GPU alone won't help
    host = verdict.reason.startswith("out of host memory")
    return (verdict.code == "oom" and not host) or device_memory_ran_out(said)


def ceilings_for(device: str, settings: Settings, sandbox: Sandbox, cache: Cache | None) -> dict | None:
    """Copy bandwidth and matmul rates of this GPU, measured once and cached per device and versions. Processes
    that share a data directory (bench shards, say) measure them once between them: the first holds a lock file
    beside the cache while it measures, the others wait for it and read what it stored."""
    if device != "cuda":
        return None
    name = device_name(device)
    if cache is not None and (found := cache.get_ceilings(name, versions())):
        return found
    with _measuring_alone(settings.cache_path.with_name("ceilings.lock") if cache is not None else None):
        if cache is not None and (found := cache.get_ceilings(name, versions())):
            return found  # another process measured them while this one waited
        job = Job(
            "klineage.gates.profile:ceilings_job", None, timeout_s=600, device="cuda", turns=GpuTurns.of(settings)
        )
        result = sandbox.run(job)
        if not result.ok:
            return None
        if cache is not None:
            cache.put_ceilings(name, versions(), result.value)
        return result.value


@contextlib.contextmanager
def _measuring_alone(lock_path: Path | None) -> Iterator[None]:
    """An exclusive lock on `lock_path` (none without a path): released when its holder ends, even killed."""
    if lock_path is None:
        yield
        return
    import fcntl

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check(
    workload: Workload,
    program: Program,
    settings: Settings,
    device: str = "cpu",
    gates: tuple[str, ...] = GATES,
    sandbox: Sandbox | None = None,
    on_gate: Callable[[str], None] | None = None,
    inform: bool = False,
) -> CheckReport:
    """Run `gates` in order. Never raises for a bad program: every problem is a verdict. The static policy comes
    first, before the cache and before anything of the program runs: an untrusted program it refuses gets a
    `static_ban` verdict and nothing else; with `inform`, its findings over trusted code are reported too."""
    policy = judge_program(program, inform)
    if policy.refused:
        return _refused(workload, program, device, settings, gates, policy)
    own_sandbox = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    cache = Cache(settings.cache_path)  # ceilings are always cached; verdicts only with settings.use_cache
    name = device_name(device)
    target = settings.target if device == "cpu" else name
    request = GateRequest(str(workload.path), program, device, settings, settings.target)
    verdicts, cached = [], []
    try:
        for gate in GATES:
            if gate not in gates:
                continue
            if on_gate:
                on_gate(gate)
            if gate == "profile" and device == "cuda":
                if _correctness_failed(verdicts):
                    verdicts.append(Verdict("profile", "skip", "not_correct", "not timed: the correctness gate failed"))
                    cached.append(False)
                    continue
                request = replace(request, ceilings=ceilings_for(device, settings, sandbox, cache))
            key = verdict_key(
                program.hash, workload.hash, gate, name, versions(), _key_settings(gate, settings, target)
            )
            hit = cache.get_verdict(key) if settings.use_cache and gate != "profile" else None
            if hit is not None:
                verdicts.append(Verdict.from_dict(hit))
                cached.append(True)
                continue
            verdict = _with_static_metrics(_run_gate_alone_after_oom(gate, request, sandbox), verdicts)
            verdicts.append(verdict)
            cached.append(False)
            if settings.use_cache and verdict.status in ("pass", "fail"):
                cache.put_verdict(key, program.hash, workload.hash, gate, name, versions(), verdict.as_dict())
    finally:
        if own_sandbox:
            sandbox.close()
        cache.close()
    return CheckReport(
        workload=workload.name,
        program=program.name,
        program_hash=program.hash,
        device=device,
        device_name=name,
        target=target,
        verdicts=tuple(verdicts),
        cached=tuple(cached),
        versions=versions(),
        policy=policy,
        derived_case=workload.shrunk,
        shrink_note=workload.shrink_note,
    )


# --- the static policy's step --------------------------------------------------------------------------------


def _refused(
    workload: Workload, program: Program, device: str, settings: Settings, gates: tuple[str, ...], policy: PolicyReport
) -> CheckReport:
    """The report of a program the static policy refused: the first requested gate fails with `static_ban`
    (naming the rule and the line of the first finding, every finding in its evidence), the others are skipped.
    Nothing is cached: the verdict belongs to the program's provenance, which the cache key does not hold."""
    wanted = [g for g in GATES if g in gates] or ["correctness"]
    first = policy.findings[0]
    evidence = {"findings": [str(f) for f in policy.findings], "policy": policy.as_dict()}
    verdicts = [Verdict(wanted[0], "fail", "static_ban", f"static policy: {first}", evidence=evidence)] + [
        Verdict(g, "skip", "static_ban", "not run: the static policy refused the program") for g in wanted[1:]
    ]
    name = device_name(device)
    return CheckReport(
        workload=workload.name,
        program=program.name,
        program_hash=program.hash,
        device=device,
        device_name=name,
        target=settings.target if device == "cpu" else name,
        verdicts=tuple(verdicts),
        cached=tuple(False for _ in verdicts),
        versions=versions(),
        policy=policy,
        derived_case=workload.shrunk,
        shrink_note=workload.shrink_note,
    )


def _correctness_failed(verdicts: list[Verdict]) -> bool:
    correct = next((v for v in verdicts if v.gate == "correctness"), None)
    return correct is not None and not correct.passed


def _key_settings(gate: str, settings: Settings, target: str) -> dict:
    """The settings a gate's cached verdict depends on, beside the program, workload, device and versions."""
    extra = {
        "seeds": settings.seeds,
        "seed_base": settings.seed_base,
        "seed_case": settings.seed_case,
        "target": target,
        "guard": settings.guard_bytes,
    }
    if settings.check_draw is not None:  # a fixed draw is another check than a secret one
        extra["draw"] = settings.check_draw
    if gate == "profile":
        extra.update(rep=settings.profile_rep_ms, sets=settings.rotate_sets)
    return extra


def _run_gate_alone_after_oom(gate: str, request: GateRequest, sandbox: Sandbox) -> Verdict:
    """The gate's verdict; on a GPU, a check that ran out of device memory runs once more with the GPU alone."""
    verdict = run_gate(gate, request, sandbox)
    if request.device == "cuda" and out_of_device_memory(verdict):
        # beside other jobs' checks (12 bench shards on one H200), a check can find the GPU's memory taken:
        # a blind candidate of Liger's cross-entropy failed so (RESULTS.md#run-20). Run alone, the program has the
        # whole GPU; what runs out of memory then is the program's own
        first = clip(verdict.reason, 2000)
        verdict = run_gate(gate, request, sandbox, alone=True)
        verdict = replace(verdict, evidence={**verdict.evidence, "retried_alone": first})
    return verdict


def _with_static_metrics(verdict: Verdict, verdicts: list[Verdict]) -> Verdict:
    """A profile gate with no GPU shows the compile gate's static metrics instead of a time."""
    compiled = next((v for v in verdicts if v.gate == "compile" and v.passed), None)
    if verdict.code == "no_gpu" and compiled is not None:  # show what there is instead of a time
        return Verdict(
            verdict.gate,
            verdict.status,
            verdict.code,
            verdict.reason,
            {"static_" + k: v for k, v in compiled.metrics.items()},
        )
    return verdict


__all__ = ["CheckReport", "check", "resolve_device", "verdict_from_result"]


def time_pair(
    workload: Workload,
    parent: Program,
    child: Program,
    settings: Settings,
    device: str,
    sandbox: Sandbox,
    parent_choices: dict | None = None,
) -> SandboxResult:
    """Parent and child timed interleaved on the bench case (gates.profile_pair_job); the measurement itself runs
    alone on a shared GPU (sandbox.exclusive_turn), its setup and first calls beside other jobs. A timing job that
    ran out of device memory there runs once more with the GPU alone for the whole job, as a check does
    (check.py), and says so (`retried_alone`, the first error): beside 12 bench shards on one H200, the memory
    baseline's autotune list on the fp32 batched matmul (x1.448 in RESULTS.md#run-21) found 11 MiB of the GPU free
    and went down as not faster (RESULTS.md#run-22). `parent_choices`: what the parent's autotuners chose when it
    was timed before, run again instead of tuned (gates.autotune.SettledTuners)."""
    request = GateRequest(str(workload.path), parent, device, settings)
    job = Job(
        "klineage.gates.profile:profile_pair_job",
        (request, child, parent_choices),
        timeout_s=settings.timeout_s,
        device=device,
        turns=GpuTurns.of(settings),
    )
    timed = sandbox.run(job)
    if timed.ok or device != "cuda" or not device_memory_ran_out(f"{timed.error} {timed.log}"):
        return timed
    first = clip(timed.error, 2000)
    again = sandbox.run(replace(job, gpu_alone=True))
    if again.ok:
        return replace(again, value={**again.value, "retried_alone": first})
    return replace(again, error=f"{again.error} (alone, after: {first})")
