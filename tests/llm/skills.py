"""Skill records for the LLM tests: skills mined by a model (transform `llm_rewrite`, tag L), which no mechanical
rewrite can apply, so only the llm materializer can."""

from __future__ import annotations

from klineage.skills import Skill
from klineage.transform import CONDITIONS


def llm_skill(
    name: str,
    step: int,
    intent: str = "exp2 with the log2(e) scale folded into the subtraction",
    conditions: tuple[str, ...] = ("contiguous",),
) -> Skill:
    return Skill(
        id=f"llm_rewrite.softmax.{name}.s{step}",
        name=f"{name} (test)",
        family=18,
        kind="optimization",
        intent=intent,
        transform={"id": "llm_rewrite", "tag": "L", "params": {}},
        location={
            "module": "program",
            "function": "softmax_kernel",
            "line": 15,
            "construct": "llm_rewrite",
            "before": "num = tl.exp(x - x_max)",
            "after": "num = tl.exp2((x - x_max) * LOG2E)",
        },
        conditions=[
            {"predicate": p, "description": CONDITIONS[p], "status": "condition", "evidence": "test", "probe": {}}
            for p in conditions
        ],
        effect={"cpu-interpreter": {"measured": False, "why": "test"}},
        provenance={
            "expert": name,
            "expert_hash": "0",
            "workload": "softmax",
            "lineage": "test-lineage",
            "step": step,
            "device": "cpu-interpreter",
            "versions": {},
            "date": "2026-01-01",
        },
    )
