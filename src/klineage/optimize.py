"""Optimizing (the forward walk): apply skills to a new program under the same gates, within a budget.

Each round, a method's proposer (klineage.proposers) lists candidates from the current program, best first; each
candidate costs one gate evaluation (compile and correctness on every check case; on a GPU the current program and
the candidate are then timed interleaved). A candidate is kept when it passes and, on a GPU, is faster than the
current program beyond both sides' measured spread; the next round proposes from it. The run stops at the budget,
when a round keeps nothing, or near the roofline.

Without a GPU nothing is timed: a correct candidate is kept only when it comes from evidence (a mined skill, a
remembered outcome) that does not say it is slower, and the report says that no time was taken."""

from __future__ import annotations

import datetime
import difflib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from klineage.check import CheckReport, check, time_pair
from klineage.config import Settings, device_name, versions
from klineage.library import Library
from klineage.llm import usage_line
from klineage.program import Program
from klineage.proposers import (
    LAUNCH_CONFIG,
    AutotuneProposer,
    BlindProposer,
    Candidate,
    MemoryEntry,
    MemoryProposer,
    Proposer,
    Refusal,
    SkillProposer,
    features,
    launched_kernel,
    load_memory,
    memory_base,
    memory_path,
    remember,
    remember_attempts,
)
from klineage.sandbox import Sandbox
from klineage.workload import UserError, Workload

METHODS = ("klineage", "blind", "memory", "autotune")
# On a GPU the correctness gate compiles and launches every case itself; the compile gate's separate pass (every
# case again, for static metrics) cost 8.4 s of a 35 s matmul candidate on the H200 (docs/BENCHMARKS.md).
CANDIDATE_GATES = {False: ("compile", "correctness"), True: ("correctness",)}
NEAR_ROOFLINE = 0.95  # stop when the profile gate puts the program at this fraction of the roofline


@dataclass(frozen=True)
class Attempt:
    evaluation: int  # 1-based gate evaluation that judged it
    candidate: Candidate
    kept: bool
    outcome: str  # kept | failed_gate | not_faster | not_timed (the GPU's timing job failed) | unmeasured (no GPU)
    verdicts: list[dict]
    effect: dict  # {"measured", "current_ms", "candidate_ms", "speedup", spreads} or {"measured": False, "why"}
    seconds: float = 0.0  # wall time of its gates and its timing, waits for a shared GPU included
    check_seconds: float = 0.0  # of which its gates (compile, correctness)

    def as_dict(self) -> dict:
        return {
            "evaluation": self.evaluation,
            "candidate": self.candidate.as_dict(),
            "kept": self.kept,
            "outcome": self.outcome,
            "verdicts": self.verdicts,
            "effect": self.effect,
            "seconds": round(self.seconds, 3),
            "check_seconds": round(self.check_seconds, 3),
        }


@dataclass(frozen=True)
class Trajectory:
    method: str
    workload: str
    program: str
    device: str
    budget: int
    evaluations: int
    attempts: list[Attempt]
    refusals: list[Refusal]
    start: Program = field(repr=False)
    best: Program = field(repr=False)
    start_ms: float | None
    best_ms: float | None
    roofline_fraction: float | None
    stop: str
    timed: bool
    versions: dict
    date: str
    seconds: float
    llm: dict | None = None  # model calls and tokens (klineage.llm.Usage) when a model materialized candidates
    evidence: dict | None = None  # what the order rested on: the library's skills, how many timed (Proposer.evidence)
    # seconds outside the attempts: the start's check ("start_check_s"; 0 where an earlier method of a bench instance
    # checked it) and the final pair and profile ("final_s"); the rest of `seconds` is proposing and writing
    phases: dict | None = None
    bound: str | None = None  # what sets the bench case's roofline, "memory" or "compute" (the profile gate's)

    @property
    def speedup(self) -> float | None:
        if self.start_ms and self.best_ms:
            return self.start_ms / self.best_ms
        return None

    def evaluations_to(self, fraction: float = 0.95) -> int | None:
        """Gate evaluations spent until the kept programs' product of measured step speedups reached `fraction` of
        the final log-speedup (None when nothing was timed or nothing got faster)."""
        steps = [(a.evaluation, a.effect["speedup"]) for a in self.attempts if a.kept and a.effect.get("measured")]
        total = sum(math.log(s) for _, s in steps)
        if not self.timed or total <= 0:
            return None
        reached = 0.0
        for evaluation, speedup in steps:
            reached += math.log(speedup)
            if reached >= fraction * total:
                return evaluation
        return self.evaluations

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "workload": self.workload,
            "program": self.program,
            "device": self.device,
            "budget": self.budget,
            "evaluations": self.evaluations,
            "start_hash": self.start.hash,
            "best_hash": self.best.hash,
            "start_ms": self.start_ms,
            "best_ms": self.best_ms,
            "speedup": self.speedup,
            "roofline_fraction": self.roofline_fraction,
            "bound": self.bound,
            "stop": self.stop,
            "timed": self.timed,
            "evaluations_to_95": self.evaluations_to(0.95),
            "versions": self.versions,
            "date": self.date,
            "seconds": self.seconds,
            "phases": self.phases,
            "llm": self.llm,
            "evidence": self.evidence,
            "attempts": [a.as_dict() for a in self.attempts],
            "refusals": [asdict(r) for r in self.refusals],
        }


# --- the walk ---------------------------------------------------------------------------------------------------


def proposer_for(
    method: str,
    workload: Workload,
    settings: Settings,
    device: str,
    library: Path | None = None,
    memory: Path | None = None,
) -> Proposer:
    if method == "klineage":
        if library is None or not (Path(library) / "skills").is_dir():
            raise UserError(f"--library {library}: no skill library there (run `klineage mine` first)")
        with Library(Path(library)) as lib:
            return SkillProposer(workload, settings, device, lib.list())
    if method == "blind":
        return BlindProposer(workload, settings, device)
    if method == "memory":
        return MemoryProposer(workload, settings, device, memory_base(settings, memory))
    if method == "autotune":
        return AutotuneProposer(workload, settings, device)
    raise UserError(f"--method {method}: expected one of {', '.join(METHODS)}")


def _functions_run(report) -> set[str] | None:
    """The mining walk's notion (klineage.mine), plus module-level code, which ran when the program was imported."""
    found = report.functions_run()
    return found | {"<module>"} if found else None


SHARED_MEMORY_REFUSED = "out of resource: shared memory"  # what Triton's OutOfResources says, loader or compiler


def over_shared_memory(report: CheckReport) -> str | None:
    """Why the checked program cannot load on the device, from its first failing verdict, or None: a kernel needs
    more shared memory than the device has (the compile gate says so without a GPU, compiling for the target; on
    a GPU the loader refuses the launch and the correctness gate says so). The condition `shared_memory_fits`,
    decided by the check the candidate had anyway: a method that decides its skills' conditions counts such a
    candidate as refused, not as an evaluation. The attention expert's 4-stage pipelining (run 21) and its 128x128
    tile carried onto the naive attention (262144 bytes, sm_90 has 232448) would each have spent one."""
    failed = next((v for v in report.verdicts if v.status == "fail"), None)
    if failed is None or SHARED_MEMORY_REFUSED not in failed.reason:
        return None
    return failed.reason[:300]


def _tell_launches(proposer, program: Program, report, workload: Workload) -> None:
    """Hand the proposer what the program's launches asked for (a proposer of the caller's own, duck-typed,
    may keep no such record)."""
    if isinstance(getattr(proposer, "launched", None), dict):
        proposer.launched[program.hash] = bench_launches(report, workload)


def bench_launches(report, workload: Workload) -> list[dict] | None:
    """What the program's launches asked for on the workload's bench case, as its correctness check saw them (on a
    GPU the check runs that case; the interpreter does not), or None."""
    correct = report.verdict("correctness")
    launches = (correct.evidence or {}).get("launches") if correct is not None else None
    return (launches or {}).get(workload.bench_case())


def _verdict_rows(report) -> list[dict]:
    return [{"gate": v.gate, "status": v.status, "code": v.code, "reason": v.reason[:300]} for v in report.verdicts]


def _time_pair(workload, current: Program, candidate: Program, settings, device, sandbox, memo: dict | None) -> dict:
    """Current and candidate timed interleaved. `memo` (one bench instance's, shared by its methods): a pair
    already timed in this run is not timed again; its effect is marked `reused`."""
    key = ("pair", current.hash, candidate.hash)
    if memo is not None and key in memo:
        return {**memo[key], "reused": True}
    effect = _timed_effect(workload, current, candidate, settings, device, sandbox)
    if memo is not None and effect["measured"]:
        memo[key] = effect
    return effect


def _timed_effect(workload, current: Program, candidate: Program, settings, device, sandbox) -> dict:
    began = time.perf_counter()
    timed = time_pair(workload, current, candidate, settings, device, sandbox)
    if not timed.ok:
        return {"measured": False, "why": f"timing failed: {timed.error}"}
    v = timed.value
    return {
        "measured": True,
        "case": v["case"],
        "current_ms": v["parent_ms"],
        "candidate_ms": v["child_ms"],
        "current_spread": v["parent_spread"],
        "candidate_spread": v["child_spread"],
        "speedup": v["parent_ms"] / v["child_ms"],
        # where the timing job's time went: the job as the caller saw it (the child's start included), the
        # child's setup (programs installed, models built, inputs made), its first calls (compiling, beside
        # other jobs), waiting for the GPU alone, holding it
        "job_s": round(time.perf_counter() - began, 3),
        **{k: round(v[k], 3) for k in ("setup_s", "first_calls_s", "gpu_wait_s", "gpu_held_s") if k in v},
        **({"retried_alone": v["retried_alone"]} if "retried_alone" in v else {}),
    }


def _memoized(memo: dict | None, key: tuple, make: Callable[[], CheckReport]) -> CheckReport:
    """A check's report from `memo` when one from the same run has it (a profile too: the same program measured
    once per instance, not once per method), else made and remembered."""
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]


def optimize(
    workload: Workload,
    program: Program,
    proposer: Proposer,
    settings: Settings,
    device: str = "cpu",
    budget: int = 20,
    sandbox: Sandbox | None = None,
    on_attempt: Callable[[Attempt], None] | None = None,
    explore: bool = False,
    memo: dict | None = None,
) -> Trajectory:
    """The forward walk. Never raises for a bad candidate: every problem is a verdict in the trajectory.
    `explore`: without a GPU, gate every candidate and keep the correct ones even without evidence of speed (to
    record outcomes for the memory baseline's knowledge base; such a program is not an optimization result).
    `memo`: measurements to share between runs from the same start in one process (bench passes one per instance,
    so the methods do not time the same start, pair or result twice); every run still spends its own evaluations."""
    started = time.perf_counter()
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    attempts: list[Attempt] = []
    evaluations = 0
    stop = "budget spent"
    start_ms = best_ms = roofline = bound = None
    phases = {"start_check_s": 0.0, "final_s": 0.0}
    try:
        began = time.perf_counter()
        base = _memoized(
            memo, ("check", program.hash, device), lambda: check(workload, program, settings, device, sandbox=sandbox)
        )
        phases["start_check_s"] = round(time.perf_counter() - began, 3)
        evaluations += 1
        if not base.passed:
            failed = next(v for v in base.verdicts if not v.passed and v.status != "skip")
            raise UserError(
                f"the starting program {program.name} fails its {failed.gate} gate ({failed.code}: "
                f"{failed.reason[:200]}); optimize starts from a correct program"
            )
        profile = base.verdict("profile")
        if profile is not None and profile.passed:
            start_ms = best_ms = profile.metrics.get("median_ms")
            roofline, bound = profile.metrics.get("roofline_fraction"), profile.metrics.get("bound")
        current = program
        seen = {program.hash}
        # only sites in functions the check ran are worth a candidate (an installed module's backward kernels are
        # never launched by a forward workload); None when the gate could not tell
        ran = {program.hash: _functions_run(base)}
        _tell_launches(proposer, program, base, workload)
        follow: list = []  # a proposer's follow-up (a repair, a next step), gated before the next listed candidate
        while True:
            if roofline is not None and roofline >= NEAR_ROOFLINE:
                stop = f"within {1 - NEAR_ROOFLINE:.0%} of the roofline"
                break
            kept = None
            # a follow-up made from a kept candidate is written on it, the program this round starts from: it carries
            pending = iter(proposer.propose(current))
            while evaluations < budget and (cand := follow.pop() if follow else next(pending, None)) is not None:
                ran_now = ran.get(current.hash)
                # a site in code the check never ran, or a launch (in a host function that ran) of a kernel that
                # never did
                if ran_now and (cand.function not in ran_now or launched_kernel(cand, current) not in (None, *ran_now)):
                    continue
                if not proposer.worth(cand):
                    continue  # what this run measured since the list was made says it will not pay
                # decided before the candidate program is written (writing one can be expensive: Candidate.made)
                if round(cand.expected, 2) < 1.0:
                    # its own evidence (a skill's measured effect, a remembered outcome) says slower, by 1% or more
                    # (closer is noise, as in proposers.best_first): the rows-per-program skill's x0.999, measured
                    # where the RMSNorm expert's dispatch kept one row per program, held back RoPE's rows twin
                    # (x4.73 for blind) while KLineage spent three evaluations on int64 offsets (H200, run 20)
                    continue
                if (
                    device != "cuda"
                    and not explore
                    and (cand.origin in ("catalog", LAUNCH_CONFIG) or cand.needs_timing)
                ):
                    continue  # untimed here, and nothing else to decide it on
                if cand.program is None or cand.program.hash in seen:
                    continue  # the rewrite did not apply here, or gave a program already tried
                seen.add(cand.program.hash)
                began = time.perf_counter()
                report = check(workload, cand.program, settings, device, CANDIDATE_GATES[device == "cuda"], sandbox)
                checked = time.perf_counter() - began
                if (
                    not report.passed
                    and getattr(proposer, "decides_conditions", False)
                    and (over := over_shared_memory(report))
                ):
                    proposer.refuse_candidate(cand, "shared_memory_fits", over)
                    # the same change with a guard's construct that saves shared memory (SkillProposer.after_refusal)
                    after = getattr(proposer, "after_refusal", None)
                    if after is not None and (fix := after(cand, "shared_memory_fits")) is not None:
                        follow.append(fix)
                    phases["refused_checks_s"] = round(phases.get("refused_checks_s", 0.0) + checked, 3)
                    continue
                evaluations += 1
                if not report.passed:
                    attempt = Attempt(
                        evaluations,
                        cand,
                        False,
                        "failed_gate",
                        _verdict_rows(report),
                        {},
                        time.perf_counter() - began,
                        checked,
                    )
                elif device == "cuda":
                    effect = _time_pair(workload, current, cand.program, settings, device, sandbox, memo)
                    noise = effect.get("current_spread", 0) + effect.get("candidate_spread", 0)
                    faster = effect.get("measured") and effect["speedup"] > 1 + max(noise, 0.01)
                    outcome = "kept" if faster else "not_faster" if effect.get("measured") else "not_timed"
                    attempt = Attempt(
                        evaluations,
                        cand,
                        bool(faster),
                        outcome,
                        _verdict_rows(report),
                        effect,
                        time.perf_counter() - began,
                        checked,
                    )
                else:
                    attempt = Attempt(
                        evaluations,
                        cand,
                        True,
                        "unmeasured",
                        _verdict_rows(report),
                        {
                            "measured": False,
                            "why": f"no GPU: kept on the skill's evidence (expected x{cand.expected:.3f}), not timed",
                        },
                        time.perf_counter() - began,
                        checked,
                    )
                attempts.append(attempt)
                if on_attempt:
                    on_attempt(attempt)
                if (fix := proposer.observe(attempt, budget - evaluations)) is not None:
                    follow.append(fix)
                if attempt.kept:
                    kept = cand
                    ran[cand.program.hash] = _functions_run(report)
                    _tell_launches(proposer, cand.program, report, workload)
                    break
            if kept is None:
                stop = "budget spent" if evaluations >= budget else "no candidate left that improves the program"
                break
            current = kept.program
        if device == "cuda" and current is not program:  # start and result timed side by side, not from two runs
            began = time.perf_counter()
            final = _time_pair(workload, program, current, settings, device, sandbox, memo)
            if final.get("measured"):
                start_ms, best_ms = final["current_ms"], final["candidate_ms"]
            profiled = _memoized(
                memo,
                ("profile", current.hash, device),
                lambda: check(workload, current, settings, device, ("profile",), sandbox),
            ).verdict("profile")
            if profiled is not None and profiled.passed:
                roofline, bound = profiled.metrics.get("roofline_fraction"), profiled.metrics.get("bound")
                profiled_ms = profiled.metrics.get("median_ms")
                # Two medians of the same program: the profile gate's and the final pair's. Interference only ever
                # slows a program down, so the faster one is the better estimate; in run 15 the profile gate timed
                # RoPE's final program at about 0.159 ms where the pair beside it took 0.1348 ms (and the bench's
                # references job 0.1327 ms), and its roofline column read 0.80 instead of 0.94.
                if roofline and profiled_ms and best_ms and best_ms < profiled_ms:
                    roofline *= profiled_ms / best_ms
            phases["final_s"] = round(time.perf_counter() - began, 3)
    finally:
        if own:
            sandbox.close()
    return Trajectory(
        method=proposer.method,
        workload=workload.name,
        program=program.name,
        device=device_name(device),
        budget=budget,
        evaluations=evaluations,
        attempts=attempts,
        start=program,
        refusals=[r for r in proposer.refusals if not ran.get(current.hash) or r.function in ran[current.hash]],
        best=current,
        start_ms=start_ms,
        best_ms=best_ms,
        roofline_fraction=roofline,
        bound=bound,
        stop=stop,
        timed=device == "cuda",
        versions=versions(),
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        seconds=time.perf_counter() - started,
        llm=proposer.llm_usage(),
        evidence=proposer.evidence(),
        phases=phases,
    )


# --- output -------------------------------------------------------------------------------------------------------


def diff(trajectory: Trajectory) -> str:
    out = []
    start = dict(trajectory.start.module_sources())
    for module, source in trajectory.best.module_sources():
        before = start.get(module, "")
        out.extend(
            difflib.unified_diff(before.splitlines(True), source.splitlines(True), f"a/{module}.py", f"b/{module}.py")
        )
    return "".join(out)


def evidence_line(evidence: dict, timed: bool) -> str:
    """The library's evidence in one line, with what to do when a GPU run has none of its own."""
    e = evidence
    skills = f"{e['skills']} optimization skill{'' if e['skills'] == 1 else 's'}"
    here = f", {e['measured_here']} on this one ({e['device']})" if timed else ""
    line = f"Library: {skills}, {e['measured']} with an effect timed on a GPU{here}."
    if e.get("imported"):
        line += f" {e['imported']} of those effects were imported from another data directory (`klineage effects`)."
    if timed and e["skills"] and not e["measured"]:
        line += (
            " None was timed, so no skill expects a speedup and the order is the families' cost, as the blind "
            "catalog's is. Time the library on this GPU: `klineage mine WORKLOAD EXPERT --walk-device cpu "
            "--device cuda` for each walk made on the CPU."
        )
    elif timed and e["measured"] and not e["measured_here"]:
        line += " The effects were timed on another GPU and are used as they are."
    return line


def seconds_line(t: Trajectory) -> str:
    """Where a run's wall time went: the start's check, the attempts, the final timing, the rest (proposing)."""
    attempts = sum(a.seconds for a in t.attempts)
    start, final = t.phases.get("start_check_s", 0.0), t.phases.get("final_s", 0.0)
    parts = [
        f"the start's check {start:.0f} s" if start else "the start's check reused",
        f"{len(t.attempts)} attempt{'s' * (len(t.attempts) != 1)} {attempts:.0f} s",
    ]
    parts += [f"start and result timed side by side {final:.0f} s"] if final else []
    refused = t.phases.get("refused_checks_s", 0.0)
    parts += [f"checking candidates refused for shared memory {refused:.0f} s"] if refused else []
    parts.append(f"proposing and the rest {max(0.0, t.seconds - start - attempts - final - refused):.0f} s")
    return "Seconds: " + ", ".join(parts) + "."


def report(trajectory: Trajectory) -> str:
    t = trajectory
    kept = [a for a in t.attempts if a.kept]
    lines = [
        f"# Optimization report: {t.program} on {t.workload}",
        "",
        f"Method `{t.method}`, device {t.device}, budget {t.budget} gate evaluations, {t.evaluations} spent "
        f"(the first checks the starting program), {t.seconds:.0f} s; stopped: {t.stop}.",
        "",
    ]
    if t.phases:
        lines += [seconds_line(t), ""]
    if t.llm:
        lines += [usage_line(t.llm), ""]
    if t.evidence:
        lines += [evidence_line(t.evidence, t.timed), ""]
    if t.timed and t.speedup:
        lines.append(
            f"Time on the bench case: {t.start_ms:.4g} ms -> {t.best_ms:.4g} ms (x{t.speedup:.3f})"
            + (f", {t.roofline_fraction:.0%} of the roofline" if t.roofline_fraction else "")
            + "."
        )
        if (n := t.evaluations_to(0.95)) is not None:
            lines.append(f"Evaluations to reach 95% of the final speedup: {n}.")
    elif not t.timed:
        lines.append(
            "No GPU: no time was taken. A candidate was kept when it passed the compile and correctness gates "
            "and came from evidence (a skill mined from an expert, a remembered outcome) that does not say it "
            "is slower; numbers (tiles, warps, stages) and catalog guesses need a timer and were not tried. "
            "Time the result on a GPU."
        )
    lines += ["", "## Kept", ""]
    lines += [
        f"{i}. {a.candidate.label} (from `{a.candidate.origin}`"
        + (f"; {', '.join(a.candidate.decided_by)}" if a.candidate.decided_by else "")
        + ")"
        + (f": x{a.effect['speedup']:.3f}" if a.effect.get("measured") else "")
        for i, a in enumerate(kept, 1)
    ] or ["- nothing"]
    rejected = [a for a in t.attempts if not a.kept]
    lines += ["", "## Tried and not kept", ""]
    for a in rejected:
        why = next((f"{v['gate']} {v['code']}" for v in a.verdicts if v["status"] == "fail"), a.outcome)
        if a.outcome == "not_faster" and a.effect.get("measured"):
            why = f"not faster beyond the spread (x{a.effect['speedup']:.3f})"
        elif a.outcome == "not_timed":
            why = a.effect.get("why", "timing failed")[:200]
        lines.append(f"- {a.candidate.label}: {why}")
    lines += ["- nothing"] if not rejected else []
    lines += ["", "## Refused (no budget spent)", ""]
    lines += [
        f"- `{r.transform}` from `{r.origin}` at {r.function}: condition `{r.predicate}`: {r.reason}"
        for r in t.refusals
    ] or ["- nothing"]
    lines += ["", f"Versions: {t.versions}; {t.date}.", ""]
    return "\n".join(lines)


def write_outputs(trajectory: Trajectory, out: Path) -> dict[str, Path]:
    """The optimized program as readable source (with its override modules), the diff, trajectory and report."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    best = trajectory.best
    paths = {
        "program": out / "program.py",
        "diff": out / "changes.diff",
        "trajectory": out / "trajectory.json",
        "report": out / "report.md",
    }
    paths["program"].write_text(best.source)
    for name, source in best.modules.items():
        (out / "modules").mkdir(exist_ok=True)
        (out / "modules" / f"{name}.py").write_text(source)
    paths["diff"].write_text(diff(trajectory))
    paths["trajectory"].write_text(json.dumps(trajectory.as_dict(), indent=2))
    paths["report"].write_text(report(trajectory))
    return paths


__all__ = [
    "METHODS",
    "Attempt",
    "AutotuneProposer",
    "BlindProposer",
    "Candidate",
    "MemoryEntry",
    "MemoryProposer",
    "Proposer",
    "Refusal",
    "SkillProposer",
    "Trajectory",
    "diff",
    "features",
    "load_memory",
    "memory_base",
    "memory_path",
    "optimize",
    "proposer_for",
    "remember",
    "remember_attempts",
    "report",
    "write_outputs",
]
