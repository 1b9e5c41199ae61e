"""The autotune baseline: launch-configuration search only (block sizes, warps, stages)."""

from __future__ import annotations

from klineage.program import Program
from klineage.proposers.base import LAUNCH_CONFIG, Candidate, Proposer, best_first, knob_setter, rewriter, sites_in


class AutotuneProposer(Proposer):
    """Launch configuration only: tile sizes, warps, stages (adding the knobs where a launch has none)."""

    method = "autotune"

    def propose(self, program: Program) -> list[Candidate]:
        out = list(self.launch_candidates(program, LAUNCH_CONFIG, 1.0))
        knobs = knob_setter()
        for module, source, site in sites_in(knobs, program):
            for warps in ("2", "8", "16"):
                params = {"num_warps": warps}
                out.append(
                    Candidate(
                        f"num_warps={warps} at {site.function}",
                        LAUNCH_CONFIG,
                        knobs.id,
                        module,
                        site.function,
                        params,
                        1.0,
                        "",
                        (),
                        rewriter(program, module, knobs, source, site, params),
                        site.before,
                    )
                )
        return best_first(out)
