"""Skill records for optimize tests, made directly (mining is tested elsewhere): a family, the expert's params, the
conditions a probe would have backed with a counterexample, and optionally a measured effect."""

from __future__ import annotations

from klineage.skills import Skill
from klineage.transform import CONDITIONS, TRANSFORMS, load_families


def make_skill(transform: str, params: dict, conditions: tuple[str, ...] = (), speedup: float | None = None,
               status: str = "condition") -> Skill:  # fmt: skip
    load_families()
    cls = TRANSFORMS[transform]
    effect = {"measured": False, "why": "test"}
    if speedup is not None:
        effect = {"measured": True, "case": "bench", "parent_ms": 1.0, "child_ms": speedup, "speedup": speedup,
                  "parent_spread": 0.01, "child_spread": 0.01, "significant": True}  # fmt: skip
    return Skill(
        id=f"{transform}.test.s0", name=f"{transform} (test)", family=cls.family, kind="optimization",
        intent=cls.intent, transform={"id": transform, "tag": cls.tag, "params": params},
        location={"module": "program", "function": "k", "line": 1, "construct": transform, "before": "", "after": ""},
        conditions=[{"predicate": p, "description": CONDITIONS[p], "status": status, "evidence": "test",
                     "probe": {}} for p in conditions],
        effect={"NVIDIA H200": effect},
        provenance={"expert": "test", "expert_hash": "0", "workload": "test", "lineage": "test", "step": 0,
                    "device": "NVIDIA H200", "versions": {}, "date": "2026-11-30"},
    )  # fmt: skip
