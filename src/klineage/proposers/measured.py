"""What a KLineage run measured so far, and what it says about candidates still listed or worth trying next: the
rewrites it spent, the warps it ordered at each launch, and the ladders of the twins it kept. SkillProposer
holds one of each (`worth` asks them before a candidate is gated, `observe` tells them every attempt)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from klineage import launch_config
from klineage.carry import literal_int
from klineage.program import Program
from klineage.proposers.base import LAUNCH_CONFIG, PRIOR_SPEEDUP, Candidate, clearly_slower, rewriter
from klineage.transform import Site, Transform


def spent_key(candidate: Candidate) -> tuple:
    """The same rewrite at the same site: by the site's code, not its label, whose line moves when an earlier
    change is kept (whole_row_tile on MSE's final reduction, spent at forward:42, came back as forward:60 after the
    rows twin was kept above it; H200, RESULTS.md#run-10)."""
    where = candidate.site or candidate.label
    return (
        candidate.origin,
        candidate.transform,
        candidate.module,
        candidate.function,
        where,
        json.dumps(candidate.params, sort_keys=True, default=str),
    )


@dataclass
class Spent:
    """Rewrites this run gated and found no faster, or failing, by `spent_key` -> why: the same rewrite at the same
    site, offered again once another change was kept, is not gated again (whole_row_tile on MSE's small final
    reduction ran at x1.000 three times in one run of 6 evaluations; H200, RESULTS.md#run-8)."""

    why: dict[tuple, str] = field(default_factory=dict)

    def record(self, attempt) -> None:
        cand, effect = attempt.candidate, attempt.effect
        if cand.transform != LAUNCH_CONFIG and attempt.outcome in ("not_faster", "not_confirmed", "failed_gate"):
            ran = (
                f"ran at x{effect['speedup']:.3f}"
                if attempt.outcome in ("not_faster", "not_confirmed") and effect.get("speedup")
                else attempt.outcome.replace("_", " ")
            )
            self.why[spent_key(cand)] = f"the same rewrite here {ran} at evaluation {attempt.evaluation}"

    def reason(self, candidate: Candidate) -> str | None:
        return self.why.get(spent_key(candidate))


@dataclass(frozen=True)
class KnobSite:
    """Where a launch-knob candidate changes warps: enough to write its neighbour on the other side."""

    program: Program
    module: str
    transform: Transform
    source: str
    site: Site
    kernel: str
    present: int  # the warps the launch has now


@dataclass
class Warps:
    """Which of two warp counts this run measured faster at a launch and tile, beyond both spreads (a kept change,
    or a clear slowdown), and what that says: not warps already measured slower, nor further in that direction;
    after the next count up from the present warps measured a clear slowdown, half the present warps next."""

    sites: dict[tuple, KnobSite] = field(default_factory=dict)  # launch-knob candidates (by key) -> where
    # launch-configuration search keys naming a num_warps -> (module, kernel, elements per program, present warps)
    keys: dict[tuple[str, str], tuple[str, str, int | None, int]] = field(default_factory=dict)
    # (module, kernel, elements per program) -> what this run measured there: (slower warps, faster warps, why)
    order: dict[tuple, list[tuple[int, int, str]]] = field(default_factory=dict)
    fewer_tried: set[tuple] = field(default_factory=set)

    def listed(self, program: Program) -> None:
        """The launches whose `num_warps` the launch-configuration search may change in this round's list."""
        self.keys = {
            (module, t.key): (module, t.kernel, launch_config.elements_per_program(source, t.kernel), t.value)
            for module, source in program.module_sources()
            for t in launch_config.tunables(source)
            if t.keyword == "num_warps"
        }

    def move(self, candidate: Candidate) -> tuple[tuple, int, int] | None:
        """Where a candidate changes a launch's warps: ((module, kernel, elements per program), present, new); None
        for any other candidate. Launch knobs name their site; the launch-configuration search names the launch's
        `num_warps` by its key."""
        if (at := self.sites.get(candidate.key)) is not None:
            warps = literal_int(candidate.params.get("num_warps"))
            elements = launch_config.elements_per_program(at.source, at.kernel)
            return None if warps is None else ((at.module, at.kernel, elements), at.present, warps)
        if candidate.transform != LAUNCH_CONFIG or len(candidate.params) != 1:
            return None
        ((key, value),) = candidate.params.items()
        found = self.keys.get((candidate.module, key))
        warps = literal_int(value)
        if found is None or warps is None:
            return None
        module, kernel, elements, present = found
        return (module, kernel, elements), present, warps

    def slower(self, candidate: Candidate) -> str | None:
        """Why the candidate's warps will not pay: warps this run already measured slower at the same launch and
        tile, or further in that direction (more than a count measured too many, fewer than one measured too few);
        None otherwise."""
        move = self.move(candidate)
        if move is None:
            return None
        where, _, warps = move
        for slower, faster, why in self.order.get(where, []):
            if (slower > faster and warps >= slower) or (slower < faster and warps <= slower):
                return why
        return None

    def measured(self, attempt, evaluations_left: int) -> Candidate | None:
        """Records the order an attempt measured at its launch; returns half the present warps to gate next where the
        next count up measured a clear slowdown (once per launch)."""
        cand, effect = attempt.candidate, attempt.effect
        move = self.move(cand)
        if move is None or not effect.get("measured") or attempt.outcome not in ("kept", "not_faster"):
            return None
        where, present, warps = move
        (module, kernel, _), speedup = where, effect["speedup"]
        if attempt.kept:
            why = f"{present} warps at {kernel}'s launch ran at x{1 / speedup:.2f} of {warps} in this run"
            self.order.setdefault(where, []).append((present, warps, f"{why} (evaluation {attempt.evaluation})"))
            return None
        if not clearly_slower(effect):
            return None  # within the noise: the two counts are not ordered
        why = f"{warps} warps at {kernel}'s launch ran at x{speedup:.2f} of {present} in this run"
        self.order.setdefault(where, []).append((warps, present, f"{why} (evaluation {attempt.evaluation})"))
        at = self.sites.get(cand.key)
        # only the next count up says the present one is already too many: 16 warps slower than 4, with 8 even,
        # pointed nowhere below 4 (the naive RMSNorm's 2 warps ran at x0.996, an evaluation spent; H200,
        # RESULTS.md#run-6)
        if (
            at is None
            or not present < warps <= 2 * present
            or where in self.fewer_tried
            or present < 2
            or evaluations_left < 1
        ):
            return None
        self.fewer_tried.add(where)
        return self._fewer(at, cand, module, present, warps, speedup)

    def _fewer(self, at: KnobSite, cand: Candidate, module: str, present: int, warps: int, speedup: float):
        fewer = {"num_warps": str(present // 2)}
        follow = Candidate(
            f"{at.transform.id} at {at.site.function}:{at.site.line} (num_warps={present // 2}: "
            f"{warps} ran at x{speedup:.2f})",
            cand.origin,
            at.transform.id,
            module,
            at.site.function,
            fewer,
            PRIOR_SPEEDUP,
            "",
            cand.decided_by,
            rewriter(at.program, at.module, at.transform, at.source, at.site, fewer),
        )
        self.sites[follow.key] = at  # so that its own measurement is recorded too
        return follow


@dataclass(frozen=True)
class Rung:
    """Where a ladder follow-up stands: the family whose twin it scales, the kernel, the factor it applied, the
    program it rewrote, its step number, and the names its label and parameter use (Transform.ladders)."""

    family: Transform
    module: str
    kernel: str
    factor: float
    base: Program
    steps: int
    twin: str
    name: str


@dataclass
class Ladders:
    """A launch value of a kept twin computed from its tile, one rung of its ladder at a time (Transform.ladders):
    the launch-configuration search has no literal to change there. After the one-tile twin (whole_row_tile's warps)
    the layer norms, log-softmax and row argmax had stopped with budget left (H200, RESULTS.md#run-9): its warps
    are halved first; kept, halved again; the first halving slower, doubled once instead. looped_tile's swept
    values a thread go up first (LoopedTile.ladder_first)."""

    rungs: dict[tuple, Rung] = field(default_factory=dict)  # a follow-up (by key) -> where it stands
    laddered: set[tuple[str, str]] = field(default_factory=set)  # (module, kernel) whose ladder was started

    def follow(self, attempt, evaluations_left: int, families: dict[str, Transform]) -> Candidate | None:
        cand = attempt.candidate
        if evaluations_left < 1:
            return None
        if (family := families.get(cand.transform)) is not None and attempt.kept:
            return self._step(family, cand, cand.program, family.ladder_first, 1, None)
        if (at := self.rungs.get(cand.key)) is None:
            return None
        if attempt.kept:
            return self._step(at.family, cand, cand.program, at.factor, at.steps + 1, at)
        if at.steps == 1 and at.factor == at.family.ladder_first and attempt.outcome == "not_faster":
            return self._step(at.family, cand, at.base, 1 / at.factor, 1, at)
        return None

    def _step(
        self, family: Transform, cand: Candidate, program: Program | None, factor: float, steps: int, at: Rung | None
    ) -> Candidate | None:
        for module, source in program.module_sources() if program is not None else []:
            if at is not None:
                ladders = {at.kernel: (at.twin, at.name)}
            else:
                ladders = {k: v for k, v in family.ladders(source).items() if (module, k) not in self.laddered}
            for kernel, (twin, name) in ladders.items():
                new = family.scaled_ladder(source, kernel, factor)
                if new is None:
                    continue
                self.laddered.add((module, kernel))
                follow = Candidate(
                    f"{twin} {name} x{factor:g} (its ladder, one rung {'down' if factor < 1 else 'up'})",
                    cand.origin,
                    LAUNCH_CONFIG,
                    module,
                    cand.function,
                    {f"{twin}.{name}": f"x{factor:g}"},
                    PRIOR_SPEEDUP,
                    "",
                    cand.decided_by,
                    program.with_source(module, new),
                )
                self.rungs[follow.key] = Rung(family, module, kernel, factor, program, steps, twin, name)
                return follow
        return None
