"""The blind baseline: the same transform catalog with default parameters, no conditions, no effects (knows what,
not when)."""

from __future__ import annotations

from klineage.program import Program
from klineage.proposers.base import LAUNCH_CONFIG, Candidate, Proposer, best_first, catalog_candidates, families


class BlindProposer(Proposer):
    """The transform catalog in its fixed order with default parameters: no conditions, no effects."""

    method = "blind"

    def __init__(self, workload, settings, device):
        super().__init__(workload, settings, device)
        self.transforms = families()

    def propose(self, program: Program) -> list[Candidate]:
        out = list(catalog_candidates(program, self.transforms.values()))
        out.extend(self.launch_candidates(program, LAUNCH_CONFIG, 1.0))
        return best_first(out)
