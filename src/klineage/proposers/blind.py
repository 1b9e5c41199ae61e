"""The blind baseline: the same transform catalog with default parameters, no conditions, no effects (knows what,
not when)."""

from __future__ import annotations

from klineage.program import Program
from klineage.proposers.base import LAUNCH_CONFIG, Candidate, Proposer, best_first, families, rewriter, sites_in


class BlindProposer(Proposer):
    """The transform catalog in its fixed order with default parameters: no conditions, no effects."""

    method = "blind"

    def __init__(self, workload, settings, device):
        super().__init__(workload, settings, device)
        self.transforms = families()

    def propose(self, program: Program) -> list[Candidate]:
        out = []
        for transform in self.transforms.values():
            for module, source, site in sites_in(transform, program):
                params = transform.blind_params(source, site)
                if params is not None:
                    label = f"{transform.id} at {site.function}:{site.line}"
                    out.append(
                        Candidate(
                            label,
                            "catalog",
                            transform.id,
                            module,
                            site.function,
                            params,
                            1.0,
                            "",
                            (),
                            rewriter(program, module, transform, source, site, params),
                            site.before,
                        )
                    )
        out.extend(self.launch_candidates(program, LAUNCH_CONFIG, 1.0))
        return best_first(out)
