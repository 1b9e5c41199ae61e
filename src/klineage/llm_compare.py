"""The paper's comparison, with a language model doing the work: the same model, the same prompts, the same budget
(gate evaluations, model calls, tokens) and the same starting program, given either

- `klineage`: the library's skills as a curriculum in lineage order, each skill's conditions decided against the
  workload's domain first (refused skills cost nothing), or
- `memory`: the memory baseline's retrieved notes (KernelBlaster/KernelSkill-style past outcomes by program
  features, no conditions).

Nothing mechanical runs on either side (`LLMProposer(mechanical=False)`): the model materializes every piece of
guidance, and repairs a candidate that failed a gate within the budget. Both trajectories and a side-by-side report
are written. `klineage llm-compare WORKLOAD PROGRAM` runs it in one command against the configured endpoint.

A run against a scripted server (the test suite's loopback) exercises the harness; its numbers say nothing about
any model and are not results."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from klineage.config import Settings
from klineage.llm import LLMClient
from klineage.llm_propose import llm_proposer
from klineage.optimize import Trajectory, optimize, proposer_for, write_outputs
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.workload import Workload

ARMS = ("klineage", "memory")


def run_comparison(
    workload: Workload,
    program: Program,
    settings: Settings,
    device: str,
    library: Path | None,
    memory: Path | None,
    budget: int,
    client: Callable[[], LLMClient],
    repairs: int = 1,
    sandbox: Sandbox | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Trajectory]:
    """One optimization run per arm; `client()` makes a fresh client (same endpoint, same caps) for each."""
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    arms = {}
    try:
        for arm in ARMS:
            base = proposer_for(arm, workload, settings, device, library, memory)
            proposer = llm_proposer(base, client(), mechanical=False, repairs=repairs)

            def progress(attempt, arm=arm) -> None:
                if on_progress:
                    on_progress(f"{arm}: {attempt.candidate.label[:50]}: {attempt.outcome}")

            arms[arm] = optimize(workload, program, proposer, settings, device, budget, sandbox, on_attempt=progress)
    finally:
        if own:
            sandbox.close()
    return arms


def _row(t: Trajectory) -> dict:
    llm = t.llm or {}
    failed = sum(1 for a in t.attempts if a.outcome == "failed_gate")
    return {
        "method": t.method,
        "evaluations": t.evaluations,
        "budget": t.budget,
        "candidates": len(t.attempts),
        "kept": sum(1 for a in t.attempts if a.kept),
        "failed_gate": failed,
        "failed_share": failed / len(t.attempts) if t.attempts else None,
        "refused": len(t.refusals),
        "model_calls": llm.get("calls", 0),
        "prompt_tokens": llm.get("prompt_tokens", 0),
        "completion_tokens": llm.get("completion_tokens", 0),
        "rejected_replies": llm.get("rejected", {}),
        "timed": t.timed,
        "speedup": t.speedup,
        "evaluations_to_95": t.evaluations_to(0.95),
        "changed": t.best.hash != t.start.hash,
        "stop": t.stop,
    }


def summary(arms: dict[str, Trajectory]) -> dict:
    first = next(iter(arms.values()))
    llm = first.llm or {}
    return {
        "workload": first.workload,
        "program": first.program,
        "device": first.device,
        "budget": first.budget,
        "model": llm.get("model"),
        "base_url": llm.get("base_url"),
        "max_calls": llm.get("max_calls"),
        "max_tokens": llm.get("max_tokens"),
        "versions": first.versions,
        "date": first.date,
        "arms": {name: _row(t) for name, t in arms.items()},
    }


def markdown(arms: dict[str, Trajectory]) -> str:
    s = summary(arms)
    caps = f"{s['max_calls']} model calls" + (f", {s['max_tokens']} tokens" if s["max_tokens"] else "")
    lines = [
        f"# Skills as a curriculum vs memory notes: {s['program']} on {s['workload']}",
        "",
        f"Model `{s['model']}`" + (f" at {s['base_url']}" if s["base_url"] else "") + f"; device {s['device']}; "
        f"budget {s['budget']} gate evaluations and {caps} per arm; the same prompts on both sides, nothing "
        f"mechanical; {s['date']}.",
        "",
        "| arm | evaluations | candidates | kept | failed a gate | refused | model calls | tokens (prompt + "
        "completion) | replies rejected | speedup | stop |",
        "|" + " --- |" * 11,
    ]
    for name, r in s["arms"].items():
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(r["rejected_replies"].items())) or "none"
        speed = f"x{r['speedup']:.3f}" if r["timed"] and r["speedup"] else "not timed"
        lines.append(
            f"| {name} | {r['evaluations']} | {r['candidates']} | {r['kept']} | {r['failed_gate']} | "
            f"{r['refused']} | {r['model_calls']} | {r['prompt_tokens']} + {r['completion_tokens']} | "
            f"{rejected} | {speed} | {r['stop']} |"
        )
    if not next(iter(arms.values())).timed:
        lines += [
            "",
            "No GPU: nothing was timed, so neither arm's kept programs are shown to be faster; compare gate "
            "failures, refusals and model spend, and run on a GPU for speed.",
        ]
    lines += [
        "",
        "Each arm's program, diff, trajectory and report are in its folder. A run against a scripted "
        "server exercises the harness only: its numbers describe no model.",
        "",
    ]
    return "\n".join(lines)


def write_comparison(arms: dict[str, Trajectory], out: Path) -> dict[str, Path]:
    out = Path(out)
    paths = {}
    for name, t in arms.items():
        paths[name] = write_outputs(t, out / name)["report"]
    paths["markdown"] = out / "compare.md"
    paths["json"] = out / "compare.json"
    paths["markdown"].write_text(markdown(arms))
    paths["json"].write_text(json.dumps(summary(arms), indent=2, default=str))
    return paths


__all__ = ["ARMS", "markdown", "run_comparison", "summary", "write_comparison"]
