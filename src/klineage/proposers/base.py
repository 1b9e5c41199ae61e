"""What every proposer shares: the candidate and refusal records, writing a candidate program, the order of a
list, and `Proposer` itself with the launch-configuration search and the hooks optimize calls.

A family's particular rules (which kernels its twins make a fallback, what it writes beyond its rewrite, how it
ranks) are asked of the family (klineage.transform's hooks); nothing here names one."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields

import libcst as cst

from klineage import launch_config
from klineage.carry import literal_int
from klineage.config import Settings
from klineage.program import Program
from klineage.transform import TRANSFORMS, Site, Transform, family, kernel_names, load_families
from klineage.workload import Workload

# The transform name of a launch-configuration step (a tile, warps or stages changed to a neighbouring value, an
# expert's tile set on this program's launch): no family rewrites it, klineage.launch_config does.
LAUNCH_CONFIG = "launch_config"
LAUNCH_CONFIG_RANK = 0  # its own numbers come first where the evidence ties (Transform.forward_rank)
PRIOR_SPEEDUP = 1.0  # an unmeasured skill promises nothing: candidates are then ordered by family cost
STRIDE_GAIN = 1.5  # a kept tile step that paid this much is followed by x4, not x2 (Proposer._same_way)


@dataclass(frozen=True)
class Candidate:
    label: str  # what is tried, in a few words
    origin: str  # skill id, "catalog", "memory:<entry>" or "launch_config"
    transform: str  # transform id, or "launch_config"
    module: str
    function: str
    params: dict
    expected: float  # expected speedup from the evidence (1.0: none)
    guard: str  # predicate dispatched on at launch ("" for none)
    decided_by: tuple[str, ...]  # conditions that were checked for it, "predicate: verdict"
    # the candidate program, or a function that writes it when first asked: a proposal round lists many candidates
    # and a budget evaluates few (writing each up front took 136 s on Liger's cross-entropy module)
    made: object = field(repr=False, compare=False)
    site: str = ""  # the code of the site it rewrites, where it has one (line numbers move when a change is kept)
    # a skill's way here: its expert and the likeness of their contexts (klineage.likeness), the effect the skill
    # recorded and the one expected here, and why none is where it is no evidence here (SkillProposer.transfer)
    transfer: dict = field(default_factory=dict, compare=False)

    @functools.cached_property
    def program(self) -> Program | None:
        """The rewritten program; None when the rewrite turned out not to apply (costs no budget)."""
        return self.made() if callable(self.made) else self.made

    @property
    def key(self) -> tuple:
        """What makes two proposals the same without writing either."""
        return (self.transform, self.module, self.label, json.dumps(self.params, sort_keys=True, default=str))

    @property
    def needs_timing(self) -> bool:
        """Whether it chooses numbers a timer must judge: a launch-configuration step, or a family that chooses them
        (Transform.needs_timing)."""
        found = family(self.transform)
        return self.transform == LAUNCH_CONFIG or (found is not None and found.needs_timing)

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "made"}
        d["program_hash"] = self.program.hash if self.program is not None else None
        return d


@dataclass(frozen=True)
class Refusal:
    origin: str
    transform: str
    function: str
    predicate: str
    reason: str


# --- families, their sites, and writing a candidate ---------------------------------------------------------------


def families() -> dict[str, Transform]:
    """Every registered family, one instance each, cheapest first (the blind catalog's order)."""
    load_families()
    return {tid: cls() for tid, cls in sorted(TRANSFORMS.items(), key=lambda kv: (kv[1].cost, kv[0]))}


def knob_setter() -> Transform:
    """The family that writes num_warps / num_stages onto a launch that passes none (Transform.sets_launch_knobs)."""
    return next(t for t in families().values() if t.sets_launch_knobs)


def sites_in(transform: Transform, program: Program) -> Iterator[tuple[str, str, Site]]:
    """(module, source, site) for every optimize site of a family in the program's modules; a family that fails on
    odd code offers none there."""
    for module, source in program.module_sources():
        try:
            sites = transform.optimize_sites(source)
        except Exception:
            continue
        for site in sites:
            if not runs_as_fallback(source, kernel_of(site, source)):
                yield module, source, site


@functools.cache
def _twin_suffixes() -> tuple[str, ...]:
    return tuple(cls.twin_suffix for cls in load_families().values() if cls.twin_suffix)


def runs_as_fallback(source: str, kernel: str | None) -> bool:
    """Whether `kernel` only runs where a twin of it cannot (Transform.twin_suffix: rows wider than the one-tile
    twin's cap, row tiles wider than the rows twin's cap): a change to it, or to its launch, leaves the timed case
    as it was and would spend an evaluation on nothing."""
    return kernel is not None and any(f"def {kernel}{twin}(" in source for twin in _twin_suffixes())


@functools.lru_cache(maxsize=64)  # asked per site and per candidate of every round, of the same few sources
def _kernel_names(source: str) -> frozenset[str]:
    try:
        return frozenset(kernel_names(cst.parse_module(source)))
    except cst.ParserSyntaxError:
        return frozenset()


def kernel_of(site: Site, source: str) -> str | None:
    """The Triton kernel a site is in, or that its launch launches."""
    return _kernel_at(site.function, site.before, source)


def _kernel_at(function: str, code: str, source: str) -> str | None:
    """`function` where it is a kernel of `source`; else the kernel that `code` (a launch statement) launches."""
    kernels = _kernel_names(source)
    if function in kernels:
        return function
    # `name[` rather than `name[grid](`: a grid lambda holds brackets of its own (the rows twin's
    # `META["BLOCK_ROW"]`), and its launch had been taken for no kernel's, so its carried warps went uncapped
    launched = re.findall(r"(\w+)\s*\[", code)
    return next((k for k in launched if k in kernels), None)


def launched_kernel(candidate: Candidate, program: Program) -> str | None:
    """The Triton kernel a candidate's site launches, where the site is a launch in a host function (launch knobs,
    a dispatch); None for a site inside a kernel, or none found. A check's `functions_run` names the host function,
    which ran, not which of its launches did: Liger SwiGLU's Blackwell-only tiled launch took two of KLineage's three
    evaluations on the H200 and changed nothing there (x1.0008 and x1.000, RESULTS.md#run-19)."""
    source = dict(program.module_sources()).get(candidate.module)
    if not source or not candidate.site:
        return None
    kernel = _kernel_at(candidate.function, candidate.site, source)
    return None if kernel == candidate.function else kernel


def rewriter(program: Program, module: str, transform: Transform, source: str, site: Site, params: dict):
    """A function that writes the candidate program (None when the rewrite does not apply)."""

    def make() -> Program | None:
        new = rewritten(transform, source, site, params)
        return program.with_source(module, new) if new is not None else None

    return make


def rewritten(transform: Transform, source: str, site: Site, params: dict) -> str | None:
    """The family's rewrite at `site`, with what the forward direction adds on the host (Transform.host_side); None
    where it fails, changes nothing or does not compile."""
    try:
        out = transform.optimize(source, site, params)
    except Exception:
        return None
    out = transform.host_side(source, out, site)
    if out == source:
        return None
    try:
        compile(out, "<candidate>", "exec")
    except SyntaxError:
        return None
    return out


def retuned(
    program: Program, module: str, source: str, values: dict[str, int], knobs: dict[str, int] | None = None
) -> Program | None:
    """The program with launch parameters set to `values`, and `knobs` ({kernel.num_warps: 8, ...}) appended to
    the launches of their kernels that pass no knob (None when one of those cannot be written)."""
    new = launch_config.with_values(source, values)
    if knobs:
        new = _with_knobs(new, knobs)
    return program.with_source(module, new) if new is not None else None


def _with_knobs(source: str, knobs: dict[str, int]) -> str | None:
    """`source` with `kernel.num_warps`-style knobs appended to every launch of their kernels that passes no knob
    (those run Triton's defaults), through the family that writes launch knobs; None when a launch could not be
    rewritten."""
    transform = knob_setter()
    by_kernel: dict[str, dict[str, str]] = {}
    for key, value in knobs.items():
        kernel, knob = key.rsplit(".", 1)
        by_kernel.setdefault(kernel, {})[knob] = str(value)
    for kernel, params in by_kernel.items():
        for _ in range(16):  # each rewrite gives one launch its knobs; a module launches a kernel a few times
            site = next((s for s in transform.optimize_sites(source) if kernel_of(s, source) == kernel), None)
            if site is None:
                break
            new = rewritten(transform, source, site, params)
            if new is None:
                return None
            source = new
    return source


def forward_rank(transform: str) -> float:
    """Where a candidate of this transform goes among candidates whose evidence ties (Transform.forward_rank)."""
    if transform == LAUNCH_CONFIG:
        return LAUNCH_CONFIG_RANK
    found = family(transform)
    return found.forward_rank if found is not None else Transform.forward_rank


def catalog_candidates(
    program: Program,
    transforms: Iterable[Transform],
    skip: Callable[[Transform, str, Site], bool] | None = None,
    params: dict | None = None,
) -> Iterator[Candidate]:
    """Each family's default rewrite at each of its sites (Transform.blind_params), expecting nothing: the catalog
    as a method without an expert's evidence applies it. `skip(transform, source, site)`: true for a site to leave.
    `params`: the same sites rewritten with these parameters instead (benchmarks/retime_rewrite.py --params)."""
    for transform in transforms:
        for module, source, site in sites_in(transform, program):
            default = transform.blind_params(source, site)  # None: the family offers no rewrite here
            if default is not None and not (skip and skip(transform, source, site)):
                chosen = default if params is None else params
                label = f"{transform.id} at {site.function}:{site.line}"
                make = rewriter(program, module, transform, source, site, chosen)
                yield Candidate(
                    label, "catalog", transform.id, module, site.function, chosen, 1.0, "", (), make, site.before
                )


def best_first(candidates: list[Candidate], spread: Program | None = None) -> list[Candidate]:
    """Best expected effect first (to 1%: closer is noise), then the families' forward rank, then proposal order
    (an expert's config list is in its order of preference); one candidate per proposal (the walk also skips
    programs it saw). With `spread` (the program proposed on), a candidate no evidence speaks for (`uninformed`)
    waits, within its expected effect, behind the first candidate of every other family: its family's n-th in one
    kernel (the kernel a launch launches, for a launch site) goes in the n-th turn. On FlagGems's group norm (H100,
    RESULTS.md#wild-h100-9) KLineage spent its three evaluations on one launch knob's variants carried from
    elementwise kernels (likeness 0.05), while blind's second candidate, the catalog's looped tile, ran at x1.60. A
    kernel's loads are sites of one family each: counted per site, the hints at every load of one kernel went before
    other families' first candidates. In the wild instances' newest GPU runs (2026-12-05 to -07) 25 of KLineage's 98
    evaluations were cache hints expecting x1.00 (liger softmax's, x0.9996 there), none kept, 10 of them a second or
    third load's hint in one kernel (RESULTS.md#spread-per-kernel)."""
    turns: dict[tuple, int] = {}

    def turn(c: Candidate) -> int:
        if spread is None or not uninformed(c):
            return 0
        group = (c.transform, c.module, c.function, launched_kernel(c, spread))
        turns[group] = turns.get(group, -1) + 1
        return turns[group]

    # turns counted best expectation first: a candidate expecting x0.75 does not take its family's first turn
    listed = sorted(enumerate(candidates), key=lambda ic: (-round(ic[1].expected, 2), ic[0]))
    ranked = [(-round(c.expected, 2), turn(c), forward_rank(c.transform), i, c) for i, c in listed]
    seen, out = set(), []
    for *_, c in sorted(ranked, key=lambda r: r[:4]):
        if c.key not in seen:
            seen.add(c.key)
            out.append(c)
    return out


def idle_stages(candidate: Candidate, program: Program, compiled: list[dict] | None) -> str | None:
    """Why a candidate that changes only a launch's num_stages compiles the same kernel, or None: every
    specialization of the kernel the program compiled ran at 2 stages or more with no load pipelined, and the
    candidate keeps its warps. Triton's pipeliner makes loads asynchronous only where it pipelines a loop (a tl.dot
    loop's loads at launch level, in Triton 3.6 on sm_90); at 1-4 stages a loop of plain loads and a loop-free kernel
    compiled to identical cubins (`benchmarks/stages_cubin.py`). In the H100 and H200 wild runs of 2026-12-05 to
    -07, 47 of KLineage's 422 evaluations were fla's `num_warps=4, num_stages=1`, and none was kept (x0.995-x1.021,
    RESULTS.md#wild-h100-10)."""
    if candidate.transform == LAUNCH_CONFIG:
        if len(candidate.params) != 1:
            return None
        ((key, value),) = candidate.params.items()
        kernel, _, knob = key.rpartition(".")
        knobs = {knob: value}
    else:
        kernel, knobs = launched_kernel(candidate, program), dict(candidate.params)
    if not compiled or kernel is None or set(knobs) - {"num_warps", "num_stages"} or "num_stages" not in knobs:
        return None
    specs = [m for m in compiled if m.get("name") == kernel]
    stages, warps = literal_int(knobs["num_stages"]), literal_int(knobs.get("num_warps"))
    if not specs or stages is None or (knobs.get("num_warps") is not None and warps is None):
        return None
    for m in specs:
        if m.get("pipelined_loads") != 0 or (m.get("num_stages") or 0) < 2 or m.get("num_stages") == stages:
            return None
        if warps is not None and m.get("num_warps") != warps:
            return None
    return (
        f"{kernel} compiled at {specs[0]['num_stages']} stages with no load pipelined: {stages} stages at the same "
        "warps compiles the same kernel"
    )


def clearly_slower(effect: dict) -> bool:
    """Whether a measured candidate ran slower than the current program beyond both spreads (at least 1%): closer
    is noise, and orders nothing."""
    noise = max(effect.get("current_spread", 0.0) + effect.get("candidate_spread", 0.0), 0.01)
    return effect["speedup"] < 1 / (1 + noise)


def uninformed(candidate: Candidate) -> bool:
    """Whether no evidence speaks for the candidate: it expects no gain (to 1%), and is not an untimed step of a
    like kernel's expert (the matmul expert's tiles on the int8 matmuls, in the expert's order of preference: its
    second ran x2.02 on an H200, RESULTS.md#wild-quant-h200). The catalog's default rewrite, a skill measured on
    an unlike kernel, and one measured on a like kernel at no gain all are: on group norm the softmax expert's
    launch knob (x0.9996 there) took two evaluations after the spread was first written (RESULTS.md#wild-h100-9)."""
    if round(candidate.expected, 2) > 1.0:
        return False
    return not (candidate.transfer.get("like_kernel") and candidate.transfer.get("recorded") is None)


# --- the proposer -------------------------------------------------------------------------------------------------


class Proposer:
    """Turns the current program into an ordered list of candidates. Subclasses say where ideas come from."""

    method = ""
    # whether optimize counts a candidate that cannot load (more shared memory than the device has) as refused
    # (`refuse_candidate`, then `after_refusal`) rather than as a spent evaluation: a method that decides its
    # skills' conditions decides shared_memory_fits too
    decides_conditions = False

    def __init__(self, workload: Workload, settings: Settings, device: str):
        self.workload, self.settings, self.device = workload, settings, device
        self.refusals: list[Refusal] = []
        # program hash -> its launches on the bench case (optimize fills it from each check: klineage.gates'
        # launch_rows); a tile computed at run time has a size only there
        self.launched: dict[str, list[dict] | None] = {}
        # program hash -> the kernel specializations its compile gate compiled (optimize fills it: compiled_kernels)
        self.compiled: dict[str, list[dict] | None] = {}
        # launch-configuration steps listed so far: candidate key -> {tunable key: (keyword, before, after)}
        self._steps: dict[tuple, dict[str, tuple[str, int, int]]] = {}
        # ... and where each was written from: candidate key -> (program, module, source)
        self._step_from: dict[tuple, tuple[Program, str, str]] = {}
        # (program hash, module, tunable keys) not to go the other way from again: turned once, or reached the same way
        self._turned: set[tuple] = set()

    def propose(self, program: Program) -> list[Candidate]:
        raise NotImplementedError

    def observe(self, attempt, evaluations_left: int) -> Candidate | None:
        """Told every gated attempt in order; may return a follow-up candidate to gate next (the llm materializer's
        repair of a failed one)."""
        return None

    def refuse_candidate(self, candidate: Candidate, predicate: str, reason: str) -> None:
        """A candidate refused after it was written (a condition decided on its program): one line each."""
        self.refusals.append(
            Refusal(
                candidate.origin, candidate.transform, candidate.function, predicate, f"{candidate.label}: {reason}"
            )
        )

    def after_refusal(self, candidate: Candidate, predicate: str) -> Candidate | None:
        """Told a candidate optimize refused after writing it (`predicate`, today shared_memory_fits); may return the
        same change written so that it passes, to gate next."""
        return None

    def llm_usage(self) -> dict | None:
        """Model calls and tokens spent (None for a proposer that uses no model)."""
        return None

    def evidence(self) -> dict | None:
        """What the proposer's order rests on, for the report (None: a method with no library)."""
        return None

    def worth(self, candidate: Candidate) -> bool:
        """Asked just before a listed candidate is gated: False skips it, at no cost, because what this run measured
        after the list was made says it will not pay."""
        return True

    def launch_candidates(self, program: Program, origin: str, expected: float) -> Iterator[Candidate]:
        """One tunable changed to a neighbouring value (the launch-configuration search). Work per program whose
        loop steps by a tile moves first together with that tile, the loop's trip count kept: the atomic row sum's
        CHUNK alone went 512 -> 2048 at x1.23 and x1.07, then 4096 ran at x0.65, its 128-wide tile left to loop 32
        times (H200, RESULTS.md#run-12), where 4096 with a 1024 tile runs at 0.83 of the roofline and 8192 with 2048
        at 0.85 (`roofline_gaps.py atomic`, the same section).
        A tunable of a launch inside a host loop goes first, the rest in source order: its kernel runs once an
        iteration. FlagGems's radix sort launches its histogram once and its sweep once per 8-bit pass, each with its
        own TILE_N; stepping the histogram's first, every method spent its four evaluations there (x1.041 at best)
        and none reached the sweep's (RESULTS.md#wild-13)."""
        for module, source in program.module_sources():
            found = launch_config.tunables(source, work=True)
            for t in sorted(found, key=lambda t: not t.repeated):
                if runs_as_fallback(source, t.kernel):
                    continue
                tile = next((s for s in found if s.kernel == t.kernel and s.keyword == t.step and not s.work), None)
                # a tile's first step up may go further than one doubling (KLineage: _first_stride), a tile with
                # the work it steps through; work alone moves one step
                stride = self._first_stride(source, t.kernel) if t.keyword not in launch_config.KNOBS else 2
                far = t.value * stride if stride > 2 and launch_config.allowed(t, t.value * stride) else None
                if tile is not None:
                    wide = [far] if far and launch_config.allowed(tile, tile.value * stride) else []
                    for value in wide + launch_config.neighbours(t):
                        moved = value * tile.value // t.value
                        if value in wide or moved in launch_config.neighbours(tile):
                            yield self._step(program, module, source, {t: value, tile: moved}, origin, expected)
                for value in ([far] if far and not t.work else []) + launch_config.neighbours(t):
                    yield self._step(program, module, source, {t: value}, origin, expected)

    def _first_stride(self, source: str, kernel: str) -> int:
        """How far a tile's first step up goes: one doubling (the plain neighbourhood search)."""
        return 2

    def _step(
        self,
        program: Program,
        module: str,
        source: str,
        moves: dict[launch_config.Tunable, int],
        origin: str,
        expected: float,
    ) -> Candidate:
        values = {t.key: v for t, v in moves.items()}
        label = (
            f"{', '.join(t.key for t in moves)}: {', '.join(str(t.value) for t in moves)} -> "
            f"{', '.join(str(v) for v in moves.values())}"
        )
        make = functools.partial(retuned, program, module, source, values)
        cand = Candidate(
            label, origin, LAUNCH_CONFIG, module, next(iter(moves)).function, values, expected, "", (), make
        )
        self._steps[cand.key] = {t.key: (t.keyword, t.value, v) for t, v in moves.items()}
        self._step_from[cand.key] = (program, module, source)
        return cand

    def _same_way(self, attempt, evaluations_left: int) -> Candidate | None:
        """After a kept tile step, the next step the same way, gated before the round's list: MSE's partial sums
        paid at each block doubling (256 -> 2048 at x1.98, x1.53 and x1.10), and KLineage then spent its sixth
        evaluation on launch knobs (x1.000) where blind's fourth doubling gave x1.077 (H200, RESULTS.md#run-11).
        Warps and stages keep their own order (`SkillProposer.worth`).
        A step that paid STRIDE_GAIN or more is followed by two steps' worth at once (x4), where the tunable's bounds
        allow: the program is still far from where the tile stops paying. At budget 4 (H200, RESULTS.md#run-17)
        KLineage and blind climbed the element-wise kernels' BLOCK one doubling per evaluation (bias_gelu 128 ->
        1024 at x1.98, x1.74, x1.21), while the memory baseline, jumping to a remembered 4096 at once, ended at x4.64
        against x4.16 on bias_gelu and x3.74 against x3.44 on MSE."""
        cand = attempt.candidate
        step = self._steps.get(cand.key)
        if step is None or not attempt.kept or evaluations_left < 1 or cand.program is None:
            return None
        if any(keyword in launch_config.KNOBS or before == after for keyword, before, after in step.values()):
            return None
        source = dict(cand.program.module_sources()).get(cand.module, "")
        now = {t.key: t for t in launch_config.tunables(source, work=True)}
        gain = attempt.effect.get("speedup") or 1.0
        for stride in (4, 2) if gain >= STRIDE_GAIN else (2,):
            moves = {}
            for key, (_, before, after) in step.items():
                t = now.get(key)
                further = after * stride if after > before else after // stride
                if t is None or t.value != after or not launch_config.allowed(t, further):
                    break
                moves[t] = further
            else:
                onward = self._step(cand.program, cand.module, source, moves, cand.origin, cand.expected)
                self._turned.add(("other", *self._turn_key(onward)))  # the other way is where the walk came from
                return onward
        return None

    def _turn_key(self, cand: Candidate) -> tuple:
        program, module, _ = self._step_from[cand.key]
        return program.hash, module, tuple(sorted(self._steps[cand.key]))

    def _other_way(self, attempt, evaluations_left: int) -> Candidate | None:
        """After a tile step measured slower beyond both spreads, gated before the round's list (once per program
        and tunables): for a step of one doubling, the step the other way from the same program (a tile has one best
        size, and the slope just measured points away from it); for a step of two doublings, the one doubling
        between (it went past the best size). On FlagGems's radix sort TILE_N 1024 -> 2048 ran at x0.12; KLineage's
        spread (best_first) had put 1024 -> 512 behind every other family's first candidate and spent its two
        evaluations left on launch knobs (x1.000) where blind's next neighbour, 1024 -> 512, ran at x1.57; after that
        x1.55, its x4 step on (`_same_way`) 512 -> 128 ran at x0.62 (H100, RESULTS.md#wild-h100-10). Warps keep their
        own order (Warps.measured); a step within the noise says nothing of either side."""
        cand, effect = attempt.candidate, attempt.effect
        step, origin = self._steps.get(cand.key), self._step_from.get(cand.key)
        if step is None or origin is None or attempt.kept or attempt.outcome != "not_faster" or evaluations_left < 1:
            return None
        if not effect.get("measured") or not effect.get("speedup"):
            return None
        if not clearly_slower(effect) or any(keyword in launch_config.KNOBS for keyword, _, _ in step.values()):
            return None
        ratios = {after / before for _, before, after in step.values()}
        if len(ratios) != 1 or (ratio := ratios.pop()) not in (2, 4, 0.5, 0.25):
            return None
        far = ratio in (4, 0.25)  # two doublings: back to the one between
        program, module, source = origin
        turned = ("between" if far else "other", *self._turn_key(cand))
        if turned in self._turned:
            return None
        now = {t.key: t for t in launch_config.tunables(source, work=True)}
        moves = {}
        for key, (_, before, after) in step.items():
            t = now.get(key)
            value = before * 2 if (after > before) == far else before // 2  # between, or the other way
            if t is None or t.value != before or not launch_config.allowed(t, value):
                return None
            moves[t] = value
        self._turned.add(turned)
        return self._step(program, module, source, moves, cand.origin, cand.expected)
