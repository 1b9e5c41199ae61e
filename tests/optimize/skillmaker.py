"""Skill records for optimize tests, made directly (mining is tested elsewhere): a family, the expert's params, the
conditions a probe would have backed with a counterexample, and optionally a measured effect; and a proposer that
offers fixed programs."""

from __future__ import annotations

from klineage.proposers import Candidate, Proposer
from klineage.skills import Skill
from klineage.transform import CONDITIONS, TRANSFORMS, load_families


def make_skill(
    transform: str,
    params: dict,
    conditions: tuple[str, ...] = (),
    speedup: float | None = None,
    status: str = "condition",
    features: dict | None = None,
    tile_rank: int | None = None,
) -> Skill:
    """`features` and `tile_rank`: the expert's context (klineage.likeness); left out, it is unknown."""
    load_families()
    cls = TRANSFORMS[transform]
    effect = {"measured": False, "why": "test"}
    if speedup is not None:
        effect = {
            "measured": True,
            "case": "bench",
            "parent_ms": 1.0,
            "child_ms": speedup,
            "speedup": speedup,
            "parent_spread": 0.01,
            "child_spread": 0.01,
            "significant": True,
        }
    return Skill(
        id=f"{transform}.test.s0",
        name=f"{transform} (test)",
        family=cls.family,
        kind="optimization",
        intent=cls.intent,
        transform={"id": transform, "tag": cls.tag, "params": params},
        location={"module": "program", "function": "k", "line": 1, "construct": transform, "before": "", "after": ""},
        conditions=[
            {"predicate": p, "description": CONDITIONS[p], "status": status, "evidence": "test", "probe": {}}
            for p in conditions
        ],
        effect={"NVIDIA H200": effect},
        provenance={
            "expert": "test",
            "expert_hash": "0",
            "workload": "test",
            "lineage": "test",
            "step": 0,
            "device": "NVIDIA H200",
            "versions": {},
            "date": "2026-11-30",
            **({"features": features} if features is not None else {}),
            **({"tile_rank": tile_rank} if tile_rank is not None else {}),
        },
    )


class FixedProposer(Proposer):
    """Proposes the programs it is given every round (an A and a B program, say), as two methods might."""

    def __init__(self, method, programs):
        super().__init__(workload=None, settings=None, device="cpu")
        self.method, self.programs = method, programs

    def propose(self, program):
        return [
            Candidate(f"variant {i}", "catalog", "launch_knobs", "program", "forward", {}, 1.0, "", (), p)
            for i, p in enumerate(self.programs)
            if p.hash != program.hash
        ]
