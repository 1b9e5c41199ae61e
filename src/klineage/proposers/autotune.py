"""The autotune baseline: launch-configuration search only (block sizes, warps, stages)."""

from __future__ import annotations

from klineage.program import Program
from klineage.proposers.base import LAUNCH_CONFIG, Candidate, Proposer, best_first, families, rewriter, sites_in
from klineage.transform import WARPS_AND_STAGES


class AutotuneProposer(Proposer):
    """Launch configuration only: tile sizes, warps, stages (adding the knobs where a launch has none, and where an
    autotuner's configs come from a list built at run time: every family whose parameters are warps and stages)."""

    method = "autotune"

    def propose(self, program: Program) -> list[Candidate]:
        out = list(self.launch_candidates(program, LAUNCH_CONFIG, 1.0))
        knob_families = [t for t in families().values() if t.launch_configuration == WARPS_AND_STAGES]
        for knobs, module, source, site in ((t, *found) for t in knob_families for found in sites_in(t, program)):
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
