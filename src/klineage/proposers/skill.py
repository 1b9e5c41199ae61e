"""KLineage's proposer: the library's optimization skills. Each skill's conditions are decided against the
workload's domain (klineage.conditions): apply where they hold, apply behind a run-time guard where they hold on
part of it, refuse (no budget spent, the reason recorded) where they never hold. The expert's parameters are carried
over (Transform.carry: renamed onto this program's launch where they are tiles) and a small neighbourhood searched
(Transform.variants); candidates are ordered by the effect the skill measured, discounted by how alike the skill's
expert and this program are (klineage.likeness); a family tuned to its kernel counts only from a like kernel. A
family the library holds no skill of comes from the catalog with its defaults, expecting nothing, as blind's does."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from klineage import launch_config
from klineage.conditions import GATED, HOLDS, PARTIAL, VIOLATED, Decision, decide, guarded
from klineage.config import device_name
from klineage.features import features
from klineage.launch_config import expert_tiles
from klineage.likeness import NO_LIKE_KERNEL, Likeness, context_of, likeness, skill_context, tile_rank
from klineage.program import Program
from klineage.proposers.base import (
    LAUNCH_CONFIG,
    PRIOR_SPEEDUP,
    Candidate,
    Proposer,
    Refusal,
    best_first,
    catalog_candidates,
    families,
    idle_stages,
    kernel_of,
    retuned,
    rewriter,
    sites_in,
)
from klineage.proposers.measured import KnobSite, Ladders, Spent, Warps
from klineage.proposers.params import (
    adapt,
    config_tiles,
    element_bytes,
    missing_knobs,
    runs_one_of,
    same_construct,
    tile_assignment,
    tile_dims,
    visible_code,
)
from klineage.skills import Skill
from klineage.transform import WARPS_AND_STAGES, WHOLE_CONFIGS, Site, Transform, family
from klineage.workload import Workload

# Condition statuses decided against the domain before applying: backed by a counterexample, required where
# violated, or never probed (conservative: a predicate nobody could test must hold). "not_a_condition" (both
# forms passed the probe) and "outside_domain" (both failed) say nothing about applying.
CHECKED = ("condition", "required", "unprobed", "not_probed")
# Predicates about the program being optimized (does its kernel accumulate, does it write its inputs), decided on
# the target for every skill of a family that lists them: the expert's probe result describes the expert's code.
TARGET_PROPERTIES = ("idempotent_launch", "no_aliasing")


@dataclass(frozen=True)
class Place:
    """Where a skill is applied: the program, one of its modules with its source, the site, and the kernel the site
    is in or launches (None: neither)."""

    program: Program
    module: str
    source: str
    site: Site
    kernel: str | None


class SkillProposer(Proposer):
    """KLineage: the library's skills, their conditions decided on the domain, parameters carried over."""

    method = "klineage"
    decides_conditions = True  # optimize counts a candidate that cannot load as refused (shared_memory_fits)

    def __init__(self, workload, settings, device, skills: list[Skill], catalog: bool = True):
        super().__init__(workload, settings, device)
        self.skills = [s for s in skills if s.kind == "optimization"]
        self.catalog = catalog  # False: the skills alone, without the catalog for families they lack (`_uncovered`)
        # guards whose construct kept their expert within the device's shared memory: `after_refusal`
        self.shared_memory_guards = [s for s in skills if s.kind == "guard" and _saves_shared_memory(s)]
        self.transforms = families()
        # lineages whose warps and stages travel inside their config lists (see _expert_tiles), never alone
        self._with_configs = {
            _lineage(s) for s in self.skills if self._launch_part(s) == WHOLE_CONFIGS and config_tiles(s)
        }
        self.context: dict[str, float] = {}
        self.tile_rank: int | None = None  # the program's, with `context` its side of a likeness (`likeness`)
        self._refused: set[tuple] = set()
        # what this run measured, for `worth` and `observe`: rewrites spent, warps ordered, twins' ladders climbed
        self.spent, self.warps, self.ladders = Spent(), Warps(), Ladders()
        self.current_program: Program | None = None

    def _launch_part(self, skill: Skill) -> str | None:
        """What part of a launch configuration the skill's family carries (Transform.launch_configuration)."""
        transform = self.transforms.get(skill.transform["id"])
        return transform.launch_configuration if transform is not None else None

    def _first_stride(self, source: str, kernel: str) -> int:
        """x4 for a tile's first step up while that leaves each thread at most MIN_ELEMENTS_PER_THREAD of the
        program's elements, the density the Liger experts keep (launch_config): at one element a thread (128 at 4
        warps) each load is a 2- or 4-byte scalar, and one doubling leaves the tile far below that density. On the
        H200 (RESULTS.md#run-21) blind's one-doubling ladders ran faster at 512 than at 256 on 12 of 14
        one-dimensional held-out kernels starting at 128 elements (softplus_odd_n peaking there), the other two
        within 2% (layer norm x0.98, strided add x0.999); KLineage spent its second and third evaluations climbing
        128 -> 256 -> 1024 where the memory baseline's remembered 4096 landed at once. A tile computed at launch, or
        one the warps already fill, keeps the plain step."""
        elements = launch_config.elements_per_program(source, kernel)
        density = 32 * launch_config.present_warps(source, kernel) * launch_config.MIN_ELEMENTS_PER_THREAD
        if elements is None or elements * 4 > density:
            return 2
        return 4

    def evidence(self) -> dict:
        """How many of the library's optimization skills carry an effect timed on a GPU, and on this very device:
        without any, every skill expects x1.0 and the order is the families' cost, as blind's catalog is (a library
        walked on the CPU and never timed ended level with blind on six instances: RESULTS.md#run-16)."""
        here = device_name(self.device)
        timed = [s.timed_devices() for s in self.skills]
        # effects another data directory measured (`klineage effects import`): a report says they were carried
        imported = sum(any(s.effect[d].get("imported") for d in devices) for s, devices in zip(self.skills, timed))
        return {
            "skills": len(self.skills),
            "measured": sum(map(bool, timed)),
            "device": here,
            "measured_here": sum(here in devices for devices in timed),
            "imported": imported,
        }

    def expected(self, skill: Skill) -> float:
        """The skill's measured speedup on this device (any device if none here), its log-gain discounted by the
        likeness of the skill's context to this program's (klineage.likeness); 1.0 without a measurement, when it
        was measured in the other roofline regime (a compute-bound expert's warps and stages, x4.76 on the H200's
        matmul, say nothing about an elementwise kernel, where they had ranked first at x2.8 before this rule), or
        for a family tuned to the kernel it was measured on (Transform.tuned_to_kernel) where no like kernel
        measured it: a warp count of the cross-entropy lineage is no evidence for a matmul (issue 31)."""
        e = self._recorded(skill)
        if e is None or not self._transfers(skill) or not self._same_regime(skill) or not self._evidence_here(skill):
            return PRIOR_SPEEDUP
        gain = math.log(max(e["speedup"], 1e-3))
        if not e.get("significant", True):
            # within the noise: no evidence of a gain, nor of a loss. A quarter of a gain had still ranked
            # cross-entropy's x1.03 fast math (spreads of 7-9%) above the block-size search on every GELU-like
            # held-out kernel; a loss kept had ranked RMSNorm's rows-per-program step (x0.993, spread 0.10, at
            # 0.039 ms) below every untimed candidate, and RoPE, x5.96 with rows per program, ended at x1.24
            # (RESULTS.md#run-26; x5.95 in RESULTS.md#run-25, where the same step had timed at or above x0.995)
            gain = 0.0
        return math.exp(gain * self.likeness(skill).value)

    def _recorded(self, skill: Skill) -> dict | None:
        """The effect `expected` starts from: measured on this device, else the first measured anywhere."""
        effects = [e for e in skill.effect.values() if e.get("measured") and e.get("speedup")]
        here = [e for d, e in skill.effect.items() if d == device_name(self.device) and e.get("measured")]
        return next(iter(here or effects), None)

    def likeness(self, skill: Skill) -> Likeness:
        """How alike the skill's expert (its provenance) and this program (`context`, `tile_rank`) are."""
        target = context_of(self.context, self.tile_rank, getattr(self.workload, "name", ""))
        return likeness(skill_context(skill.provenance), target)

    def _evidence_here(self, skill: Skill) -> bool:
        """False for a family tuned to its kernel (Transform.tuned_to_kernel) whose expert is no like kernel of this
        program (another operator class, or one not known): its numbers were chosen for another loop nest."""
        transform = self.transforms.get(skill.transform["id"])
        return transform is None or not transform.tuned_to_kernel or self.likeness(skill).like

    def transfer(self, skill: Skill, expected: float) -> dict:
        """The skill's way to this candidate, for the report and the trajectory: its expert and operator, the
        likeness with its factors, the recorded effect beside the `expected` one, and `note` where it is no
        evidence here (NO_LIKE_KERNEL)."""
        like = self.likeness(skill)
        recorded = self._recorded(skill)
        expert, workload = skill.provenance.get("expert", ""), skill.provenance.get("workload", "")
        # `liger` or `expert` alone names no operator: the workload it was mined on goes first
        named = "/".join(n for n in (workload, expert) if n) or skill.id
        out = {
            "expert": expert,
            "workload": workload,
            **like.as_dict(),
            "phrase": like.phrase(named),
            "recorded": recorded["speedup"] if recorded else None,
            "expected": round(expected, 4),
        }
        if recorded is not None and not self._evidence_here(skill):
            out["note"] = NO_LIKE_KERNEL
        return out

    def _same_regime(self, skill: Skill) -> bool:
        """False where the skill was measured on a compute-bound kernel and this one is memory-bound, or the other
        way; true where either side is unknown."""
        origin = skill.provenance.get("features") or {}
        return not (
            "compute_bound" in origin
            and "compute_bound" in self.context
            and origin["compute_bound"] != self.context["compute_bound"]
        )

    def _configs_fit(self, skill: Skill, source: str, kernel: str) -> bool:
        """Whether an expert's config list is evidence for this kernel's launch: measured on the same element size,
        in the same roofline regime, on a like kernel, and (where it carries tiles) tiling the same dimensions."""
        here = tile_dims({t.keyword: t.value for t in launch_config.tunables(source) if t.kernel == kernel})
        dims = [tile_dims(t) for t in config_tiles(skill)]
        fits = self._transfers(skill) and self._same_regime(skill) and self._evidence_here(skill)
        return fits and (not dims or here in dims)

    def _transfers(self, skill: Skill) -> bool:
        """False for a launch configuration measured on another element size than this workload's (see
        Transform.launch_configuration); true where either side's element size is unknown."""
        if self._launch_part(skill) is None:
            return True
        mine, theirs = element_bytes(self.context), element_bytes(skill.provenance.get("features") or {})
        return mine is None or theirs is None or mine == theirs

    def propose(self, program: Program) -> list[Candidate]:
        self.context, self.tile_rank = features(program, self.workload), tile_rank(program)
        self.current_program = program  # what `worth` reads a candidate's launch against this round
        self.warps.listed(program)
        out: list[Candidate] = []
        sites: dict[str, list] = {}  # many skills share a family: list its sites once
        for skill in self.skills:
            transform = self.transforms.get(skill.transform["id"])
            if transform is None:
                continue
            if transform.id not in sites:
                sites[transform.id] = list(sites_in(transform, program))
            for module, source, site in sites[transform.id]:
                place = Place(program, module, source, site, kernel_of(site, source))
                out.extend(self._for_site(skill, transform, place))
        out.extend(self._expert_tiles(program))
        out.extend(self._uncovered(program))
        return best_first(out, spread=program)

    def _uncovered(self, program: Program) -> Iterator[Candidate]:
        """The catalog's default rewrite for each family the library holds no skill of, expecting nothing, as blind
        applies it: a library knows when a family pays only where it has seen it, and without this it never tried
        one it had not. On torchao's fp8 rowwise transpose with fused reduction (H200, RESULTS.md#wild-quant-h200)
        KLineage spent its three evaluations on cache hints its skills expected nothing of (liger softmax's
        x0.9996), while blind's first candidate, the catalog's loop pipelining, no skill's family, ran at x1.30.
        Evidence-backed candidates still go first (best_first), and a rewrite the bench case would not run is
        refused (Transform.untimed)."""
        if not self.catalog:
            return iter(())
        covered = {s.transform["id"] for s in self.skills}
        launched = self.launched.get(program.hash)

        def untimed(transform: Transform, source: str, site: Site) -> bool:
            why = transform.untimed(source, site, launched)
            if why:
                self._refuse(Refusal("catalog", transform.id, site.function, "timed_case", why))
            return bool(why)

        transforms = [t for tid, t in self.transforms.items() if tid not in covered]
        return catalog_candidates(program, transforms, untimed)

    def _for_site(self, skill: Skill, transform: Transform, at: Place) -> list[Candidate]:
        if not same_construct(skill.location.get("before", ""), at.site.before):
            return []  # a hint learned on a load is not evidence for a store
        if transform.launch_configuration == WARPS_AND_STAGES and _lineage(skill) in self._with_configs:
            return []  # carried inside the lineage's configs, with the tiles they were measured with
        found = self._screened(skill, transform, at)
        if found is None:
            return []
        guard = found.guard
        if guard is not None and at.kernel is not None and f"def {at.kernel}_when_{guard.predicate}(" in at.source:
            return []  # already applied behind this guard: the original kernel is the fallback path
        expected = self.expected(skill)
        carried, variants = self._variants(skill, transform, at)
        if guard is not None and at.kernel is None:
            why = f"holds on part of the domain ({guard.reason}); the site is in no kernel a launch could dispatch on"
            self._refuse(Refusal(skill.id, transform.id, at.site.function, guard.predicate, why))
            return []
        return [self._candidate(skill, transform, at, found, carried, params, expected) for params in variants]

    def _screened(self, skill: Skill, transform: Transform, at: Place) -> Screening | None:
        """The skill's conditions decided at this site, or None where the site is refused (the refusal recorded):
        the family's own objection to the site first (Transform.misfit), then the conditions on the domain, then
        whether the bench case would run the rewrite at all (Transform.untimed)."""
        expert = skill.transform.get("params") or {}
        if (misfit := transform.misfit(expert, at.source, at.site, at.kernel)) is not None:
            self._refuse(Refusal(skill.id, transform.id, at.site.function, *misfit))
            return None
        found = screen(skill, self.workload, at.source, at.kernel, self.device, self.settings.target)
        if found.refusal is not None:
            self._refuse(Refusal(skill.id, transform.id, at.site.function, *found.refusal))
            return None
        if why := transform.untimed(at.source, at.site, self.launched.get(at.program.hash)):
            self._refuse(Refusal(skill.id, transform.id, at.site.function, "timed_case", why))
            return None
        return found

    def _variants(self, skill: Skill, transform: Transform, at: Place) -> tuple[dict | None, list[dict]]:
        """(the carried parameters, the variants to try): the expert's, carried to this site (Transform.carry), and
        their neighbourhood (Transform.variants)."""
        if transform.launch_configuration == WHOLE_CONFIGS and not self._configs_fit(
            skill, at.source, at.site.function
        ):
            # the skill's conditions still decide whether autotune is safe here, but its configs were measured on
            # another loop nest, element size or regime: the matmul expert's warps and stages on layer norm's
            # 256-element block ran at x1.22 where the block doubled and 8 warps ran at x1.43 (H200,
            # RESULTS.md#run-6)
            carried = transform.blind_params(at.source, at.site)
        else:
            carried = transform.carry(skill.transform.get("params") or {}, at.source, at.site)
        return carried, transform.variants(carried, at.source, at.kernel, self.launched.get(at.program.hash))

    def _candidate(self, skill, transform, at: Place, found: Screening, carried, params, expected) -> Candidate:
        guard = found.guard
        label = f"{transform.id} at {at.site.function}:{at.site.line}" + (
            f" guarded by {guard.predicate}" if guard else ""
        )
        if params != carried:
            label += " (" + ", ".join(f"{k}={v}" for k, v in params.items() if k != "decorator")[:60] + ")"
        make = rewriter(at.program, at.module, transform, at.source, at.site, params)
        if guard is not None:
            make = functools.partial(self._guarded, make, at, guard, skill)
        here = transform.variant_expected(expected, params, carried, at.source, at.kernel)
        cand = Candidate(
            label,
            skill.id,
            transform.id,
            at.module,
            at.site.function,
            params,
            here,
            guard.predicate if guard else "",
            found.decided_by,
            make,
            at.site.before,
            self.transfer(skill, here),
        )
        if transform.sets_launch_knobs and at.kernel is not None and guard is None:
            present = launch_config.present_warps(at.source, at.kernel)
            self.warps.sites[cand.key] = KnobSite(
                at.program, at.module, transform, at.source, at.site, at.kernel, present
            )
        return cand

    def _guarded(self, make, at: Place, guard: Decision, skill: Skill) -> Program | None:
        """The rewrite behind a launch-time guard on `guard`'s predicate; refused when it cannot be isolated."""
        rewritten = make()
        if rewritten is None:
            return None
        new = guarded(at.source, dict(rewritten.module_sources())[at.module], at.kernel, guard.predicate)
        if new is None:
            why = (
                f"holds on part of the domain ({guard.reason}); the change could not be isolated behind a "
                "launch-time guard"
            )
            self._refuse(Refusal(skill.id, skill.transform["id"], at.site.function, guard.predicate, why))
            return None
        return at.program.with_source(at.module, new)

    def _expert_tiles(self, program: Program) -> list[Candidate]:
        """The launch configurations experts chose (config lists, launch knobs), set on this program's launch
        parameters of the same names; then the neighbourhood of each.

        An expert's configuration travels whole: its warps and stages were measured with its tiles, so where the
        same lineage has both an autotune config list and launch knobs, the knobs are carried only inside the
        configs (8 warps on a naive 32x32 matmul tile ran at 0.76x on the H200, the same warps with the expert's
        128x256 tile are what its 4.76x launch-knobs step measured). A configuration is expected to do what the
        best evidence of its lineage's launch steps says, and on a compute-bound program at least what the best of
        the lineage's other steps says: they were all timed at that configuration (`_measured_at_configuration`)."""
        by_lineage: dict[str, list[Skill]] = {}
        for skill in self.skills:
            if self._launch_part(skill) is not None:
                by_lineage.setdefault(_lineage(skill), []).append(skill)
        out: list[Candidate] = []
        guesses: list[Candidate] = []  # another loop nest's tiles: no evidence here
        for lineage, skills in by_lineage.items():
            for same, cand in self._lineage_tiles(program, lineage, skills):
                (out if same else guesses).append(cand)
        if self.device == "cuda":  # the neighbourhood is only worth searching where speed is measured
            out.extend(self.launch_candidates(program, LAUNCH_CONFIG, 1.0))
        return out + guesses  # after the neighbourhood: one step from a working config fails less often

    def _lineage_tiles(self, program: Program, lineage: str, skills: list[Skill]) -> Iterator[tuple[bool, Candidate]]:
        """(whether it tiles the same dimensions, the candidate) for each of one lineage's configurations."""
        has_configs = lineage in self._with_configs
        carried = [s for s in skills if not (has_configs and self._launch_part(s) == WARPS_AND_STAGES)]
        tiles = [t for s in carried for t in expert_tiles(s.transform.get("params") or {})]
        # once the program runs one of the lineage's configurations its evidence is spent: the others are
        # alternatives to try, not further gains to expect
        if runs_one_of(program, tiles):
            expected = 1.0
        else:
            expected = max(*(self.expected(s) for s in skills), self._measured_at_configuration(lineage, tiles))
        for skill in carried:
            for tile in expert_tiles(skill.transform.get("params") or {}):
                for module, source in program.module_sources():
                    tunables = launch_config.tunables(source)
                    values = tile_assignment(tunables, tile)
                    # a tiling means something for the loop nest it tiles: the expert's evidence goes with it only
                    # onto a kernel tiled along the same dimensions (a matmul's BLOCK_M/N/K onto an attention
                    # kernel's BLOCK_M/N is a guess to try, not a measured gain)
                    dims = tile_dims(tile)  # none: warps and stages alone, the lineage's own knobs
                    same = (
                        self._transfers(skill)
                        and self._evidence_here(skill)
                        and (not dims or dims == tile_dims({t.keyword: t.value for t in tunables}))
                    )
                    # the configuration's warps and stages go with its tile, onto launches that pass none
                    knobs = missing_knobs(tunables, tile) if dims and same else {}
                    if not values and not knobs:
                        continue
                    cand = Candidate(
                        f"expert tile {launch_config.describe({**values, **knobs})}",
                        skill.id,
                        LAUNCH_CONFIG,
                        module,
                        tunables[0].function,
                        {**values, **knobs},
                        expected if same else PRIOR_SPEEDUP,
                        "",
                        (),
                        functools.partial(retuned, program, module, source, values, knobs),
                        transfer=self.transfer(skill, expected if same else PRIOR_SPEEDUP),
                    )
                    yield same, cand

    def _measured_at_configuration(self, lineage: str, tiles: list[dict]) -> float:
        """What a compute-bound lineage's steps are expected to bring where the program does not run the lineage's
        configuration yet: every step was timed at that configuration, and only there is its effect evidence. So the
        configuration is ranked as the best of them and comes first. On the H200 the attention expert's exp2 fold,
        x1.39 at its 128x128 tile, ran at x1.013 on the naive attention's 32x32 tile and x1.31 at 128x64; ranked
        above the tile it spent the budget's evaluations before the tile was tried
        (RESULTS.md#attention-skills-after-run-25). 1.0 for a memory-bound program (a tile there is not what the
        steps' effects hinge on) or a lineage with no tiles."""
        if not self.context.get("compute_bound") or not tiles:
            return 1.0
        steps = [self.expected(s) for s in self.skills if _lineage(s) == lineage]
        return max(steps, default=1.0)

    def after_refusal(self, candidate: Candidate, predicate: str) -> Candidate | None:
        """A candidate refused because its kernel needs more shared memory than the device has, written again with
        the construct of a guard skill that says it avoids exactly that: removing it from its expert failed to
        compile for shared memory. The attention expert's `p.to(v.dtype)` before P @ V is one (its fp32 operands
        need 263184 bytes at the 128x128 tile and 3 stages, 232448 fit): the expert's tile carried onto the naive
        attention asks for 262144 bytes and is refused; with P and V in half it needs 229376 and compiles. Once
        per refused candidate (a rewrite refused again is not rewritten again)."""
        rewritten = {g.id for g in self.shared_memory_guards}  # a candidate this method already wrote
        if predicate != "shared_memory_fits" or candidate.origin in rewritten or candidate.program is None:
            return None
        for guard in self.shared_memory_guards:
            transform = self.transforms.get(guard.transform["id"])
            for module, source in candidate.program.module_sources() if transform is not None else ():
                sites = transform.optimize_sites(source)
                if sites:
                    return self._with_guard(candidate, guard, transform, module, source, sites[0])
        return None

    def _with_guard(self, candidate, guard: Skill, transform: Transform, module: str, source: str, site: Site):
        params = adapt(
            guard.transform.get("params") or {},
            visible_code(source, site.function),
            transform.default_params(),
            transform.label_params,
        )
        return Candidate(
            f"{candidate.label}, with {transform.id} at {site.function}:{site.line} (guard {guard.id})",
            guard.id,
            transform.id,
            module,
            site.function,
            params,
            candidate.expected,
            "",
            (*candidate.decided_by, f"shared_memory_fits: refused, then {guard.id}"),
            rewriter(candidate.program, module, transform, source, site, params),
            site.before,
            candidate.transfer,
        )

    def _refuse(self, refusal: Refusal) -> None:
        key = (refusal.transform, refusal.function, refusal.predicate)  # one line per family, not per skill
        if key not in self._refused:
            self._refused.add(key)
            self.refusals.append(refusal)

    def worth(self, candidate: Candidate) -> bool:
        """Not a rewrite this run already spent here (Spent), nor warps this run already measured slower at the same
        launch and tile, nor further in that direction (Warps): rope's 8 warps ran at x0.51 on the H200 and its 16
        warps were then tried at x0.25 (RESULTS.md#run-5); after 2 warps beat 4 on rope and on the masked softmax,
        the search went back to 4, the start's launch, x0.80 and x0.93 (RESULTS.md#run-6). The order is kept per
        tile: a kept block change moves where the warps pay."""
        why = self.spent.reason(candidate) or self.warps.slower(candidate)
        if why is not None:
            self._refuse(Refusal(candidate.origin, candidate.transform, candidate.function, "measured_here", why))
            return False
        program = self.current_program
        if program is not None and (idle := idle_stages(candidate, program, self.compiled.get(program.hash))):
            self._refuse(Refusal(candidate.origin, candidate.transform, candidate.function, "no_pipelined_loads", idle))
            return False
        return True

    def observe(self, attempt, evaluations_left: int) -> Candidate | None:
        """Records what the attempt measured (a spent rewrite, an order of two warp counts) and returns what it says
        to gate next: a kept twin's ladder one rung on, a kept tile step the same way again, a tile step measured
        clearly slower the other way, fewer warps where more measured a clear slowdown."""
        self.spent.record(attempt)
        if (ladder := self.ladders.follow(attempt, evaluations_left, self.transforms)) is not None:
            return ladder
        if (onward := self._same_way(attempt, evaluations_left)) is not None:
            return onward
        if (back := self._other_way(attempt, evaluations_left)) is not None:
            return back
        return self.warps.measured(attempt, evaluations_left)


@dataclass(frozen=True)
class Screening:
    """A skill's conditions decided for one program: why it is refused, or the guard it needs (if any)."""

    decided_by: tuple[str, ...]  # "predicate: verdict" for each condition decided
    refusal: tuple[str, str] | None = None  # (deciding predicate, reason)
    guard: Decision | None = None


def screen(skill: Skill, workload: Workload, source: str, kernel: str | None, device: str, target: str) -> Screening:
    """Decide a skill's conditions on the workload's domain and the program's code: the conditions probing backed or
    could not test, plus the family's properties of the target's own code; a robustness family's own predicate says
    where it is needed (Transform.robustness_predicate: never a guard, that would run the robust kernel only where
    the plain one would do)."""
    found = family(skill.transform["id"])
    own = found.robustness_predicate if found is not None else None
    predicates = [c["predicate"] for c in skill.conditions if c.get("status") in CHECKED and c["predicate"] != own]
    predicates += [p for p in (found.conditions if found else ()) if p in TARGET_PROPERTIES and p not in predicates]
    decisions = [decide(p, workload, source, kernel, device, target) for p in predicates]
    decided_by = tuple(f"{d.predicate}: {d.verdict}" for d in decisions)
    violated = [d for d in decisions if d.verdict == VIOLATED]
    partial = [d for d in decisions if d.verdict == PARTIAL]
    if violated or any(not d.guardable for d in partial) or len(partial) > 1:
        d = (violated or [p for p in partial if not p.guardable] or partial)[0]
        why = (
            d.reason
            if d in violated
            else f"holds on part of the domain only ({d.reason}); "
            + ("no run-time guard exists for this predicate" if not d.guardable else "more than one guard needed")
        )
        return Screening(decided_by, (d.predicate, why))
    if own is not None:
        need = decide(own, workload, source, kernel, device, target)
        if need.verdict in (HOLDS, GATED):
            return Screening(decided_by, (own, f"a robustness skill, not needed here: {need.reason}"))
        decided_by += (f"{need.predicate}: {need.verdict} ({need.reason})",)
    return Screening(decided_by, None, partial[0] if partial else None)


def _lineage(skill: Skill) -> str:
    return skill.provenance.get("lineage", skill.id)


def _saves_shared_memory(skill: Skill) -> bool:
    """A guard whose construct's removal failed its expert's compile gate for shared memory."""
    return any(f.get("gate") == "compile" and "shared memory" in f.get("detail", "") for f in skill.failures)
