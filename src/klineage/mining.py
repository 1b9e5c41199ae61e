"""The `klineage mine` stage: an expert walked backward (or its walk read as recorded), its accepted steps timed,
its conditions probed, its skills saved into a library (klineage.library, the store)."""

from __future__ import annotations

from collections.abc import Callable

from klineage.config import Settings
from klineage.features import features
from klineage.library import Library
from klineage.likeness import tile_rank
from klineage.mine import Lineage, Step, walk_for
from klineage.mine import retime as retime_lineage
from klineage.probing import probe_lineage, stored_probes
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.skills import Skill, skills_from_lineage
from klineage.workload import Workload

Probes = dict[int, list[dict]]  # a lineage's probe results by step index (klineage.probing.probe_lineage)


def mine_into(
    library: Library,
    workload: Workload,
    expert: Program,
    settings: Settings,
    device: str,
    walk_device: str | None = None,
    *,
    retime: bool = False,
    probe: bool = True,
    sandbox: Sandbox | None = None,
    max_steps: int | None = None,
    on_step: Callable[[Step], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[Lineage, Probes | None, list[Skill]]:
    """Mine EXPERT into LIBRARY: the walk (made on `walk_device`, default `device`, or read as recorded from it),
    the accepted steps timed again (`retime`, or always where the walk was made on the CPU and `device` is a GPU),
    the skills saved, the conditions probed, the skills saved again. (lineage, probes, skills). `on_phase` is told
    each phase as it starts, in a line beginning "timing" or "probing" (mine_all.py times the walk by the latter).

    The skills are saved before the probes as well as after: a run stopped while probing (a pipeline's time limit)
    then leaves skills with their measured effects, and with the conditions of the probes that finished (or the
    walk device's) rather than none. Four experts' GPU-timed effects (27 steps) were lost that way on the H200:
    their timing had finished, the probing was cut at the limit, and the skills were written only at the end
    (RESULTS.md#run-16)."""
    phase = on_phase or (lambda text: None)
    walked_elsewhere = (walk_device or device) != device
    lineage = walk_for(workload, expert, settings, device, walk_device, sandbox, max_steps=max_steps, on_step=on_step)
    if retime or walked_elsewhere:  # a walk made elsewhere has no effects of this device's
        phase(f"timing {len(lineage.accepted)} accepted steps")
        # an explicit retime measures everything again; a walk made elsewhere resumes what a stopped run timed
        lineage = retime_lineage(lineage, workload, settings, device, sandbox, keep_timed=not retime)
    context, rank = features(expert, workload), tile_rank(expert)

    def save(probes: Probes | None) -> list[Skill]:
        skills = skills_from_lineage(lineage, probes, context, rank)
        for skill in skills:
            library.save(skill)
        return skills

    if not probe:
        return lineage, None, save(None)
    save(stored_probes(lineage, settings, device) or None)
    phase(f"probing conditions of {len(lineage.accepted)} accepted steps")
    probes = probe_lineage(lineage, workload, settings, device, sandbox)
    return lineage, probes, save(probes)
