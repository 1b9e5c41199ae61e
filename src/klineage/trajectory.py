"""What a forward walk (klineage.optimize) records, and how it reads: each gated candidate's Attempt, the run's
Trajectory, and the outputs a user reads (the report, the diff from the input, the optimized program's source)."""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from klineage.llm import usage_line
from klineage.program import Program
from klineage.proposers import Candidate, Refusal


@dataclass(frozen=True)
class Attempt:
    evaluation: int  # 1-based gate evaluation that judged it
    candidate: Candidate
    kept: bool
    # kept | failed_gate | not_faster | not_confirmed (faster once, not on the re-time) | not_timed (the GPU's timing
    # job failed) | unmeasured (no GPU)
    outcome: str
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
    # checked it; of it, each gate's own as "start_<gate>_s"), the final pair and profile ("final_s"), candidates
    # refused for shared memory after their check ("refused_checks_s"); the rest of `seconds` is proposing and writing
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


# the start check's gates, each recorded as a part of the phase `start_check_s` (`start_<gate>_s`)
START_GATE_PHASES = ("compile", "correctness", "profile")


def seconds_line(t: Trajectory) -> str:
    """Where a run's wall time went: the start's check, the attempts, the final timing, the rest (proposing)."""
    attempts = sum(a.seconds for a in t.attempts)
    start, final = t.phases.get("start_check_s", 0.0), t.phases.get("final_s", 0.0)
    gates = ", ".join(
        f"{gate} {t.phases[f'start_{gate}_s']:.0f} s" for gate in START_GATE_PHASES if f"start_{gate}_s" in t.phases
    )
    parts = [
        (f"the start's check {start:.0f} s" + (f" ({gates})" if gates else ""))
        if start
        else "the start's check reused",
        f"{len(t.attempts)} attempt{'s' * (len(t.attempts) != 1)} {attempts:.0f} s",
    ]
    parts += [f"start and result timed side by side {final:.0f} s"] if final else []
    refused = t.phases.get("refused_checks_s", 0.0)
    parts += [f"checking candidates refused for shared memory {refused:.0f} s"] if refused else []
    parts.append(f"proposing and the rest {max(0.0, t.seconds - start - attempts - final - refused):.0f} s")
    return "Seconds: " + ", ".join(parts) + "."


def transfer_note(transfer: dict) -> str:
    """A skill's way to its candidate in a few words (SkillProposer.transfer): where it crossed from another
    operator, `; from <workload>/<expert> (<class>) to <class>, likeness 0.42`, then the expected effect beside the
    one the skill recorded, and where it is no evidence here, why; "" for a candidate of no skill."""
    if not transfer:
        return ""
    text = f"; {transfer['phrase']}"
    if transfer.get("recorded") is not None:
        text += f", expected x{transfer['expected']:.3f} (recorded x{transfer['recorded']:.3f})"
    if transfer.get("note"):
        text += f": {transfer['note']}"
    return text


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
        + (f" (confirmed: {a.effect['confirmation']['why']})" if "why" in a.effect.get("confirmation", {}) else "")
        + transfer_note(a.candidate.transfer)
        for i, a in enumerate(kept, 1)
    ] or ["- nothing"]
    rejected = [a for a in t.attempts if not a.kept]
    lines += ["", "## Tried and not kept", ""]
    for a in rejected:
        why = next((f"{v['gate']} {v['code']}" for v in a.verdicts if v["status"] == "fail"), a.outcome)
        if a.outcome == "not_faster" and a.effect.get("measured"):
            why = f"not faster beyond the spread (x{a.effect['speedup']:.3f})"
        elif a.outcome == "not_confirmed":
            why = f"not confirmed: {a.effect.get('confirmation', {}).get('why', 'no confirmation')}"
        elif a.outcome == "not_timed":
            why = a.effect.get("why", "timing failed")
        lines.append(f"- {a.candidate.label}: {why}{transfer_note(a.candidate.transfer)}")
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
