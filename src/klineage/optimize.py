"""Optimizing (the forward walk): apply skills to a new program under the same gates, within a budget.

Each round, a method's proposer (klineage.proposers) lists candidates from the current program, best first; each
candidate costs one gate evaluation (compile and correctness on every check case; on a GPU the current program and
the candidate are then timed interleaved). A candidate is kept when it passes and, on a GPU, is faster than the
current program beyond both sides' measured spread and a confirmation re-time in a fresh process agrees
(`_confirmed`); the next round proposes from it. The run stops at the budget,
when a round keeps nothing, or near the roofline.

Without a GPU nothing is timed: a correct candidate is kept only when it comes from evidence (a mined skill, a
remembered outcome) that does not say it is slower, and the report says that no time was taken."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path

from klineage.check import CheckReport, check, time_pair
from klineage.config import Settings, clip, device_name, versions
from klineage.library import Library
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
from klineage.timing import LAUNCH_FIGURES
from klineage.trajectory import (
    Attempt,
    Trajectory,
    diff,
    evidence_line,
    report,
    seconds_line,
    write_outputs,
)
from klineage.workload import UserError, Workload

METHODS = ("klineage", "blind", "memory", "autotune")
# On a GPU the correctness gate compiles and launches every case itself; the compile gate's separate pass (every
# case again, for static metrics) cost 8.4 s of a 35 s matmul candidate on the H200 (docs/BENCHMARKS.md).
CANDIDATE_GATES = {False: ("compile", "correctness"), True: ("correctness",)}
# the timing job's phases an effect records, in the order they happen (gates.profile.profile_pair_job)
TIMING_PHASES = ("start_s", "setup_s", "settle_s", "first_calls_s", "gpu_wait_s", "gpu_held_s")
NEAR_ROOFLINE = 0.95  # stop when the profile gate puts the program at this fraction of the roofline


def no_library_yet(settings: Settings) -> str:
    """What to do where no --library was given and the data directory has no library yet: one line."""
    return (
        f"no skill library yet in {settings.data_dir} (KLINEAGE_HOME): run `klineage demo` (mines the bundled "
        "RMSNorm expert) or `klineage mine WORKLOAD EXPERT` to make one, or pass --library DIR"
    )


def skill_library(settings: Settings, library: Path | None) -> Path:
    """The library a run reads: `library` (--library), else the data directory's; one line where there is none."""
    if library is None and not (settings.library_dir / "skills").is_dir():
        raise UserError(no_library_yet(settings))
    library = settings.library_dir if library is None else Path(library)
    if not (library / "skills").is_dir():
        raise UserError(f"--library {library}: no skill library there (run `klineage mine` first)")
    return library


def proposer_for(
    method: str,
    workload: Workload,
    settings: Settings,
    device: str,
    library: Path | None = None,
    memory: Path | None = None,
) -> Proposer:
    if method == "klineage":
        with Library(skill_library(settings, library)) as lib:
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
    candidate as refused, not as an evaluation. The attention expert's 4-stage pipelining (294944 bytes) and its
    128x128 tile carried onto the naive attention (262144 bytes; sm_90 has 232448) would each have spent one
    (RESULTS.md#run-21, RESULTS.md#run-22)."""
    failed = next((v for v in report.verdicts if v.status == "fail"), None)
    if failed is None or SHARED_MEMORY_REFUSED not in failed.reason:
        return None
    return clip(failed.reason, 2000)


def bench_launches(report, workload: Workload) -> list[dict] | None:
    """What the program's launches asked for on the workload's bench case, as its correctness check saw them (on a
    GPU the check runs that case; the interpreter does not), or None."""
    correct = report.verdict("correctness")
    launches = (correct.evidence or {}).get("launches") if correct is not None else None
    return (launches or {}).get(workload.bench_case())


def compiled_kernels(report) -> list[dict] | None:
    """Every kernel specialization the program's compile gate compiled (sass.kernel_metrics: name, warps, stages,
    pipelined loads, ...), or None where the gate did not pass."""
    compiled = report.verdict("compile")
    if compiled is None or not compiled.passed:
        return None
    return (compiled.evidence or {}).get("specializations")


def _verdict_rows(report) -> list[dict]:
    return [
        {
            "gate": v.gate,
            "status": v.status,
            "code": v.code,
            "reason": clip(v.reason, 2000),
            "seconds": v.seconds,
            # each trial's seconds (a correctness check's): the rest of its seconds is starting the candidate and
            # the reference process, importing, making inputs (bench_costs.py)
            **({"trial_seconds": v.evidence["trial_seconds"][:256]} if v.evidence.get("trial_seconds") else {}),
            # and the parts of that rest: candidate_start, reference_start, workload, static_scan
            **({"phase_seconds": v.evidence["phase_seconds"]} if v.evidence.get("phase_seconds") else {}),
        }
        for v in report.verdicts
    ]


def _time_pair(
    workload,
    current: Program,
    candidate: Program,
    settings,
    device,
    sandbox,
    memo: dict | None,
    kind: str = "pair",
    current_choices: dict | None = None,
) -> dict:
    """Current and candidate timed interleaved. `memo` (one bench instance's, shared by its methods): a pair
    already timed in this run (as this `kind` of timing) is not timed again; its effect is marked `reused`.
    `current_choices`: what the current program's autotuners chose when it was timed before, run again instead
    of tuned (gates.autotune.SettledTuners)."""
    key = (kind, current.hash, candidate.hash)
    if memo is not None and key in memo:
        return {**memo[key], "reused": True}
    effect = _timed_effect(workload, current, candidate, settings, device, sandbox, current_choices)
    if memo is not None and effect["measured"]:
        memo[key] = effect
    return effect


def _timed_effect(
    workload, current: Program, candidate: Program, settings, device, sandbox, current_choices: dict | None = None
) -> dict:
    began = time.perf_counter()
    timed = time_pair(workload, current, candidate, settings, device, sandbox, parent_choices=current_choices)
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
        # where the timing job's time went: the job as the caller saw it, the candidate process's start (its
        # program imported), its setup (programs installed, models built, inputs made), each side's first call
        # (kernels compiled, autotuners settled), the timed first calls (beside other jobs), waiting for the GPU
        # alone, holding it
        "job_s": round(time.perf_counter() - began, 3),
        **{k: round(v[k], 3) for k in TIMING_PHASES if k in v},
        **({"retried_alone": v["retried_alone"]} if "retried_alone" in v else {}),
        # what each side's autotuners ran (gates.autotune.SettledTuners); each side's host time to queue a call and
        # the share of repetitions the GPU waited for it (timing._time_calls)
        **{
            k.replace("parent", "current").replace("child", "candidate"): v[k]
            for k in (
                "parent_autotuned",
                "child_autotuned",
                *(f"{side}_{k}" for side in ("parent", "child") for k in LAUNCH_FIGURES),
            )
            if k in v
        },
        **({"pinned": v["pinned"]} if "pinned" in v else {}),
        # the current program's kernels that ran the choices it was timed with before, not tuned again
        **({"given": v["given"]} if "given" in v else {}),
    }


def _faster(effect: dict) -> bool:
    """A timed pair's candidate faster than its current program beyond both sides' spread (and 1%)."""
    noise = effect.get("current_spread", 0) + effect.get("candidate_spread", 0)
    return effect["speedup"] > 1 + max(noise, 0.01)


def _confirmation(workload, current: Program, candidate: Program, settings, device, sandbox, memo) -> dict:
    """The confirmation re-time: current and candidate timed interleaved again (A/B/A/B) in a fresh candidate
    process (every timed pair starts its own: gates.profile_pair_job), so one process's autotuner picks and one
    round's noise do not decide alone. Shared through `memo` as a pair is, apart from the first timing."""
    return _time_pair(workload, current, candidate, settings, device, sandbox, memo, kind="confirm")


def _confirmed(first: dict, again: dict) -> tuple[bool, str, dict]:
    """A gain kept only when the confirmation re-time agrees: faster beyond the spread on both rounds. An autotuned
    max-reduction's alignment hint was kept at x5.37 from one timed pair whose independent re-time read x1.00: the
    autotuner picked another config in each process and the difference was credited to the rewrite (issue 31).
    The effect's speedup is the smaller of the two rounds (what reproduces: what a later proposer or the memory
    baseline learns from); both are reported in its `confirmation`."""
    confirmation = {
        "first_speedup": first["speedup"],
        "confirmed_speedup": again.get("speedup"),
        **{k: again[k] for k in ("current_ms", "candidate_ms", "current_spread", "candidate_spread") if k in again},
        **({"reused": True} if again.get("reused") else {}),
    }
    if not again.get("measured"):
        why = f"the confirmation re-time failed ({again.get('why', 'not measured')})"
        return False, "not_confirmed", {**first, "confirmation": {**confirmation, "kept": False, "why": why}}
    if not _faster(again):
        noise = again["current_spread"] + again["candidate_spread"]
        why = (
            f"x{first['speedup']:.3f} first, x{again['speedup']:.3f} on the re-time "
            f"(not beyond its spread of {max(noise, 0.01):.1%})"
        )
        effect = {**first, "speedup": min(first["speedup"], again["speedup"])}
        return False, "not_confirmed", {**effect, "confirmation": {**confirmation, "kept": False, "why": why}}
    why = f"x{first['speedup']:.3f} first, x{again['speedup']:.3f} on the re-time"
    effect = {**first, "speedup": min(first["speedup"], again["speedup"])}
    return True, "kept", {**effect, "confirmation": {**confirmation, "kept": True, "why": why}}


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
    on_phase: Callable[[str], None] | None = None,
) -> Trajectory:
    """The forward walk. Never raises for a bad candidate: every problem is a verdict in the trajectory.
    `explore`: without a GPU, gate every candidate and keep the correct ones even without evidence of speed (to
    record outcomes for the memory baseline's knowledge base; such a program is not an optimization result).
    `memo`: measurements to share between runs from the same start in one process (bench passes one per instance,
    so the methods do not time the same start, pair or result twice); every run still spends its own evaluations.
    `on_phase`: told what the walk starts next (a gate of the start's check, a candidate's check, a timing), so a
    caller can say it before it takes minutes."""
    started = time.perf_counter()
    own = sandbox is None
    walk = _Walk(workload, program, proposer, settings, device, budget, sandbox or Sandbox(warm=settings.warm), memo)
    walk.say = on_phase or (lambda text: None)
    try:
        walk.check_start()
        while walk.stop is None:
            walk.round(on_attempt, explore)
        walk.finish()
    finally:
        if own:
            walk.sandbox.close()
    return walk.trajectory(time.perf_counter() - started)


class _Walk:
    """One forward walk: the program it stands on, what it spent and measured, and why it stopped (None: going)."""

    def __init__(self, workload, program, proposer, settings, device, budget, sandbox, memo):
        self.workload, self.start, self.proposer, self.settings = workload, program, proposer, settings
        self.device, self.budget, self.sandbox, self.memo = device, budget, sandbox, memo
        self.attempts: list[Attempt] = []
        self.evaluations = 0
        self.stop: str | None = None
        self.start_ms = self.best_ms = self.roofline = self.bound = None
        self.phases = {"start_check_s": 0.0, "final_s": 0.0}
        self.current = program
        self.seen = {program.hash}
        # per program, what its autotuners chose when it was timed (its profile, or the pair that kept it): a pair
        # from it runs them again instead of tuning (SettledTuners: the parent's tuning was most of a timing job)
        self.choices: dict[str, dict] = {}
        # only sites in functions the check ran are worth a candidate (an installed module's backward kernels are
        # never launched by a forward workload); None when the gate could not tell
        self.ran: dict[str, set[str] | None] = {}
        self.follow: list[Candidate] = []  # a proposer's follow-up (a repair, a next step), gated before the list
        self.say: Callable[[str], None] = lambda text: None  # what starts next (optimize's on_phase)

    def check_start(self) -> None:
        """The starting program's check (its first evaluation): it must be correct; its profile is the start's time
        on a GPU."""
        program, device = self.start, self.device
        began = time.perf_counter()
        where = f"checking the start program {program.name} on {device} (evaluation 1 of {self.budget})"
        self.say(where)
        paid = self.memo is None or ("check", program.hash, device) not in self.memo  # not an earlier method's
        base = _memoized(
            self.memo,
            ("check", program.hash, device),
            lambda: check(
                self.workload,
                program,
                self.settings,
                device,
                sandbox=self.sandbox,
                on_gate=lambda g: self.say(f"{where}: {g} gate"),
            ),
        )
        self.phases["start_check_s"] = round(time.perf_counter() - began, 3)
        # of that, each gate's own seconds (trajectory.START_GATE_PHASES): where an instance's first minute goes
        if paid:
            for v in base.verdicts:
                if v.seconds:
                    self.phases[f"start_{v.gate}_s"] = round(v.seconds, 3)
        self.evaluations += 1
        if not base.passed:
            failed = next(v for v in base.verdicts if not v.passed and v.status != "skip")
            raise UserError(
                f"the starting program {program.name} fails its {failed.gate} gate ({failed.code}: "
                f"{failed.reason}); optimize starts from a correct program"
            )
        profile = base.verdict("profile")
        if profile is not None and profile.passed:
            self.start_ms = self.best_ms = profile.metrics.get("median_ms")
            self.roofline, self.bound = profile.metrics.get("roofline_fraction"), profile.metrics.get("bound")
            if profile.metrics.get("autotuned"):
                self.choices[program.hash] = profile.metrics["autotuned"]
        self._stands_on(program, base)

    def _stands_on(self, program: Program, report: CheckReport) -> None:
        """What the check of the program the walk now stands on saw: the functions that ran, and (for the proposer)
        what its launches asked for on the bench case."""
        self.ran[program.hash] = _functions_run(report)
        self.proposer.launched[program.hash] = bench_launches(report, self.workload)
        self.proposer.compiled[program.hash] = compiled_kernels(report)

    def round(self, on_attempt: Callable[[Attempt], None] | None, explore: bool) -> None:
        """One proposal round from the current program: candidates gated in order (a proposer's follow-up first)
        until one is kept, the budget is spent or the list ends; sets `stop` where the walk ends."""
        if self.roofline is not None and self.roofline >= NEAR_ROOFLINE:
            self.stop = f"within {1 - NEAR_ROOFLINE:.0%} of the roofline"
            return
        # a follow-up made from a kept candidate is written on it, the program this round starts from: it carries
        pending = iter(self.proposer.propose(self.current))
        while self.evaluations < self.budget:
            cand = self.follow.pop() if self.follow else next(pending, None)
            if cand is None:
                break
            if not self._worth_gating(cand, explore):
                continue
            attempt, report = self._gate(cand)
            if attempt is None:
                continue  # refused after it was written: no evaluation spent
            self.attempts.append(attempt)
            if on_attempt:
                on_attempt(attempt)
            if (fix := self.proposer.observe(attempt, self.budget - self.evaluations)) is not None:
                self.follow.append(fix)
            if attempt.kept:
                self._stands_on(cand.program, report)
                self.current = cand.program
                if attempt.effect.get("candidate_autotuned"):
                    self.choices[cand.program.hash] = attempt.effect["candidate_autotuned"]
                return
        over = self.evaluations >= self.budget
        self.stop = "budget spent" if over else "no candidate left that improves the program"

    def _worth_gating(self, cand: Candidate, explore: bool) -> bool:
        """The filters a listed candidate passes before it is gated, in this order (`worth` records refusals, and
        the candidate program is written only by the last)."""
        ran_now = self.ran.get(self.current.hash)
        # a site in code the check never ran, or a launch (in a host function that ran) of a kernel that never did
        if ran_now and (cand.function not in ran_now or launched_kernel(cand, self.current) not in (None, *ran_now)):
            return False
        if not self.proposer.worth(cand):
            return False  # what this run measured since the list was made says it will not pay
        # decided before the candidate program is written (writing one can be expensive: Candidate.made)
        if round(cand.expected, 2) < 1.0:
            # its own evidence (a skill's measured effect, a remembered outcome) says slower, by 1% or more
            # (closer is noise, as in proposers.best_first): the rows-per-program skill's x0.999, measured
            # where the RMSNorm expert's dispatch kept one row per program, held back RoPE's rows twin
            # (x4.73 for blind) while KLineage spent three evaluations on int64 offsets (H200, RESULTS.md#run-20)
            return False
        if self.device != "cuda" and not explore and (cand.origin in ("catalog", LAUNCH_CONFIG) or cand.needs_timing):
            return False  # untimed here, and nothing else to decide it on
        if cand.program is None or cand.program.hash in self.seen:
            return False  # the rewrite did not apply here, or gave a program already tried
        self.seen.add(cand.program.hash)
        return True

    def _gate(self, cand: Candidate) -> tuple[Attempt | None, CheckReport]:
        """The candidate checked (one evaluation), then on a GPU timed against the current program; no attempt where
        the proposer counts a candidate that cannot load as refused (Proposer.decides_conditions)."""
        began = time.perf_counter()
        self.say(f"evaluation {self.evaluations + 1} of {self.budget}: checking {cand.label}")
        report = check(
            self.workload,
            cand.program,
            self.settings,
            self.device,
            CANDIDATE_GATES[self.device == "cuda"],
            self.sandbox,
        )
        checked = time.perf_counter() - began
        if not report.passed and self.proposer.decides_conditions and (over := over_shared_memory(report)):
            self.proposer.refuse_candidate(cand, "shared_memory_fits", over)
            # the same change with a guard's construct that saves shared memory (SkillProposer.after_refusal)
            if (fix := self.proposer.after_refusal(cand, "shared_memory_fits")) is not None:
                self.follow.append(fix)
            self.phases["refused_checks_s"] = round(self.phases.get("refused_checks_s", 0.0) + checked, 3)
            return None, report
        self.evaluations += 1
        rows = _verdict_rows(report)
        if not report.passed:
            kept, outcome, effect = False, "failed_gate", {}
        elif self.device == "cuda":
            kept, outcome, effect = self._timed(cand)
        else:
            why = f"no GPU: kept on the skill's evidence (expected x{cand.expected:.3f}), not timed"
            unconfirmed = {"skipped": "no GPU: nothing was timed, so there is no gain to re-time"}
            kept, outcome, effect = True, "unmeasured", {"measured": False, "why": why, "confirmation": unconfirmed}
        seconds = time.perf_counter() - began
        return Attempt(self.evaluations, cand, kept, outcome, rows, effect, seconds, checked), report

    def _timed(self, cand: Candidate) -> tuple[bool, str, dict]:
        """The current program and the candidate timed interleaved: faster beyond both spreads, then kept only when
        a confirmation re-time agrees (`_confirmed`). The first pair runs the current program's autotuners at the
        choices it was timed with before; the confirmation lets both sides tune again in a fresh process, so a
        choice that was one process's noise does not decide a keep."""
        args = (self.workload, self.current, cand.program, self.settings, self.device, self.sandbox, self.memo)
        self.say(f"evaluation {self.evaluations} of {self.budget}: timing {cand.label} against the current program")
        effect = _time_pair(*args, current_choices=self.choices.get(self.current.hash))
        if effect.get("current_autotuned") and self.current.hash not in self.choices:
            self.choices[self.current.hash] = effect["current_autotuned"]  # its profile said none: its first pair's
        faster = effect.get("measured") and _faster(effect)
        if not faster:
            return False, "not_faster" if effect.get("measured") else "not_timed", effect
        if not self.settings.confirm_gains:
            return True, "kept", {**effect, "confirmation": {"skipped": "turned off (KLINEAGE_CONFIRM=0)"}}
        self.say(f"evaluation {self.evaluations} of {self.budget}: timing {cand.label} again to confirm the gain")
        return _confirmed(effect, _confirmation(*args))

    def finish(self) -> None:
        """On a GPU, the start and the result timed side by side (not from two runs), and the result profiled."""
        current = self.current
        if self.device != "cuda" or current is self.start:
            return
        began = time.perf_counter()
        args = (self.workload, self.start, current, self.settings, self.device, self.sandbox, self.memo)
        self.say("timing the start against the result, side by side")
        final = _time_pair(*args)
        if final.get("measured"):
            self.start_ms, self.best_ms = final["current_ms"], final["candidate_ms"]
        profiled = _memoized(
            self.memo,
            ("profile", current.hash, self.device),
            lambda: check(self.workload, current, self.settings, self.device, ("profile",), self.sandbox),
        ).verdict("profile")
        if profiled is not None and profiled.passed:
            self.roofline, self.bound = profiled.metrics.get("roofline_fraction"), profiled.metrics.get("bound")
            profiled_ms = profiled.metrics.get("median_ms")
            # Two medians of the same program: the profile gate's and the final pair's. Interference only ever
            # slows a program down, so the faster one is the better estimate: the profile gate timed RoPE's final
            # program at about 0.159 ms where the pair beside it took 0.1348 ms (and the bench's references job
            # 0.1327 ms), and its roofline column read 0.80 instead of 0.94 (H200, RESULTS.md#run-15).
            if self.roofline and profiled_ms and self.best_ms and self.best_ms < profiled_ms:
                self.roofline *= profiled_ms / self.best_ms
        self.phases["final_s"] = round(time.perf_counter() - began, 3)

    def trajectory(self, seconds: float) -> Trajectory:
        ran = self.ran.get(self.current.hash)
        return Trajectory(
            method=self.proposer.method,
            workload=self.workload.name,
            program=self.start.name,
            device=device_name(self.device),
            budget=self.budget,
            evaluations=self.evaluations,
            attempts=self.attempts,
            start=self.start,
            refusals=[r for r in self.proposer.refusals if not ran or r.function in ran],
            best=self.current,
            start_ms=self.start_ms,
            best_ms=self.best_ms,
            roofline_fraction=self.roofline,
            bound=self.bound,
            stop=self.stop,
            timed=self.device == "cuda",
            versions=versions(),
            date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            seconds=seconds,
            llm=self.proposer.llm_usage(),
            evidence=self.proposer.evidence(),
            phases=self.phases,
        )


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
    "bench_launches",
    "diff",
    "evidence_line",
    "features",
    "load_memory",
    "memory_base",
    "memory_path",
    "optimize",
    "over_shared_memory",
    "no_library_yet",
    "skill_library",
    "proposer_for",
    "remember",
    "remember_attempts",
    "report",
    "seconds_line",
    "write_outputs",
]
