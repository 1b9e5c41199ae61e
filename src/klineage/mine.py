"""Mining: the backward walk from an expert program down to its simplest correct form.

Shrinker-style (Hypothesis's `consider`): from the current program, list every (transform, module, site) whose
simplification is possible, cheapest families first, in a fixed order; skip children already seen (normalized
source hash); gate the child (compile + correctness on all cases). Pass: accept the step and continue from the
child. Fail: record the rejected attempt with its verdicts. Stop when nothing untried is left.

Every step is appended to `steps.jsonl` and flushed before the walk moves on, and every version's source is stored
content-addressed, so a walk killed at any point (kill -9 included) resumes from its last recorded step with no
accepted step lost. The walk is deterministic for a given expert, workload and device: same order, same seen-set.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from klineage.check import check, time_pair
from klineage.config import Settings, clip, device_name, versions, write_whole
from klineage.gates import Verdict
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.transform import TRANSFORMS, Site, Transform, load_families
from klineage.workload import UserError, Workload

MINING_GATES = ("compile", "correctness")


class MiningError(UserError):
    pass


@dataclass(frozen=True)
class Step:
    """One attempted simplification."""

    index: int
    transform: str
    module: str  # "program" or the dotted name of an overridden module
    site: dict
    parent: str  # program hashes
    child: str
    accepted: bool
    verdicts: list[dict]
    effect: dict
    seconds: float

    @staticmethod
    def from_dict(d: dict) -> Step:
        return Step(**d)


@dataclass(frozen=True)
class Lineage:
    """The chain of accepted steps from the expert down, plus every rejected attempt."""

    id: str
    workload: str
    workload_hash: str
    expert: str
    expert_hash: str
    device: str
    versions: dict
    steps: list[Step] = field(default_factory=list)
    finished: bool = False

    @property
    def accepted(self) -> list[Step]:
        return [s for s in self.steps if s.accepted]

    @property
    def rejected(self) -> list[Step]:
        return [s for s in self.steps if not s.accepted]

    @property
    def simplest(self) -> str:
        return self.accepted[-1].child if self.accepted else self.expert_hash

    def as_dict(self) -> dict:
        return {**asdict(self), "steps": [asdict(s) for s in self.steps]}


class LineageStore:
    """`<data>/lineages/<id>/`: `meta.json`, `steps.jsonl` (append-only), `sources/<hash>/` (content-addressed
    program versions), `lineage.json` (the whole record, rewritten when the walk finishes)."""

    def __init__(self, root: Path):
        self.root = root
        (root / "sources").mkdir(parents=True, exist_ok=True)

    def save_program(self, program: Program) -> None:
        folder = self.root / "sources" / program.hash
        if not (folder / "program.py").is_file():
            program.write(folder)

    def load_program(self, program_hash: str, name: str) -> Program:
        folder = self.root / "sources" / program_hash
        modules = {p.stem: p.read_text() for p in sorted((folder / "modules").glob("*.py"))}
        return Program(name, (folder / "program.py").read_text(), modules)

    def append(self, step: Step) -> None:
        with open(self.root / "steps.jsonl", "a") as f:
            f.write(json.dumps(asdict(step)) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite_steps(self, steps: list[Step]) -> None:
        """Replace the whole record at once (a retime): written beside, then renamed over the old one."""
        write_whole(self.root / "steps.jsonl", "".join(json.dumps(asdict(s)) + "\n" for s in steps))

    def steps(self) -> list[Step]:
        path = self.root / "steps.jsonl"
        if not path.is_file():
            return []
        steps = []
        for line in path.read_text().splitlines():
            try:
                steps.append(Step.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                break  # a line cut by a kill: everything before it stands
        return steps

    def set_aside_if_workload_changed(self, workload_hash: str) -> None:
        """A walk recorded against another version of the workload (new cases, tolerances) is not resumed: its
        verdicts answered other questions. Its steps and lineage are kept beside, under the old workload's hash.
        (Records from before the hash was stored in meta.json are resumed as they are.)"""
        meta_path = self.root / "meta.json"
        old = json.loads(meta_path.read_text()).get("workload_hash") if meta_path.is_file() else None
        if old is None or old == workload_hash:
            return
        for name in ("steps.jsonl", "lineage.json"):
            if (self.root / name).is_file():
                (self.root / name).replace(self.root / f"{name}.workload-{old[:12]}")

    def write_meta(self, meta: dict) -> None:
        write_whole(self.root / "meta.json", json.dumps(meta, indent=2))

    def write_lineage(self, lineage: Lineage) -> None:
        write_whole(self.root / "lineage.json", json.dumps(lineage.as_dict(), indent=2))

    def lineage(self) -> Lineage | None:
        """The whole record as last written (None before a walk has ended once)."""
        path = self.root / "lineage.json"
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return Lineage(**{**data, "steps": [Step.from_dict(s) for s in data["steps"]]})


def lineage_id(workload: Workload, expert: Program, device: str) -> str:
    return f"{workload.name}-{expert.name}-{expert.hash[:8]}-{device}"


def walk_draw(workload: Workload, expert: Program) -> int:
    """The draw every check of a walk makes its DOMAIN case from (Settings.check_draw): one per workload and expert,
    so a walk's verdicts do not depend on which shape a check happened to draw."""
    return int(hashlib.sha256(f"walk:{workload.hash}:{expert.hash}".encode()).hexdigest()[:15], 16)


def ordered_transforms() -> list[Transform]:
    """Cheapest families first, then by id: the walk's fixed order."""
    load_families()
    return [cls() for cls in sorted(TRANSFORMS.values(), key=lambda c: (c.cost, c.id))]


def candidates(program: Program, transforms: list[Transform], ran: set[str] | None = None):
    """(transform, module, site, child) in the walk's order; a transform that fails on odd code yields nothing.
    With `ran`, only sites in functions that the workload's check ran are offered."""
    for transform in transforms:
        for module, source in program.module_sources():
            try:
                sites = transform.sites(source)
            except Exception:
                continue
            for site in sites:
                if ran is not None and site.function not in ran:
                    continue
                try:
                    child_source = transform.simplify(source, site)
                except Exception:
                    continue
                if child_source == source:
                    continue
                yield transform, module, site, program.with_source(module, child_source)


def static_delta(parent: Verdict | None, child: Verdict | None) -> dict:
    """Differences of the compile gate's static metrics (child minus parent)."""
    if parent is None or child is None or not (parent.passed and child.passed):
        return {}
    keys = (
        "max_registers",
        "spill_bytes",
        "max_shared_bytes",
        "max_load_bits",
        "max_store_bits",
        "tensor_core_instructions",
    )
    return {k: child.metrics.get(k, 0) - parent.metrics.get(k, 0) for k in keys if k in parent.metrics}


@dataclass
class Walk:
    """A backward walk in progress, the catalog's (`mine`) or a model's (`llm_mine`): the program it stands on, the
    steps it has taken, the programs it has seen, and what each program it gated compiled to and ran (a step's static
    delta and the functions whose sites are offered). Every attempt is recorded in `store` before the walk moves on."""

    workload: Workload
    settings: Settings
    device: str
    sandbox: Sandbox
    store: LineageStore
    current: Program
    steps: list[Step]
    seen: set[str]
    compiled: dict[str, Verdict | None] = field(default_factory=dict)
    ran: dict[str, set[str]] = field(default_factory=dict)
    on_step: Callable[[Step], None] | None = None
    # per program, what its autotuners ran when it was timed: a later pair from it runs that again (`_known_choices`)
    tuned: dict[str, dict] = field(default_factory=dict)

    def attempt(self, child: Program, transform, module: str, site: Site) -> Step:
        """Gate `child` (the current program with one simplification), record the step, and stand on the child where
        it passed. `transform`: what the step reads off a transform class (id, and for a skill family and tag)."""
        step = _attempt(
            self.workload,
            self.current,
            child,
            transform,
            module,
            site,
            self.settings,
            self.device,
            self.sandbox,
            len(self.steps),
            self.compiled,
            self.ran,
            self.tuned,
        )
        self.store.save_program(child)
        self.store.append(step)
        self.steps.append(step)
        if self.on_step:
            self.on_step(step)
        if step.accepted:
            self.current = child
        return step


def mine(
    workload: Workload,
    expert: Program,
    settings: Settings,
    device: str = "cpu",
    sandbox: Sandbox | None = None,
    max_steps: int | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> Lineage:
    """Walk `expert` backward; resumes a walk recorded under the same lineage id."""
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    settings = settings.replace(check_draw=walk_draw(workload, expert))
    lid = lineage_id(workload, expert, device)
    store = _open_store(settings, lid, workload, expert, device)
    steps = store.steps()  # resumed where the record stops
    current = store.load_program(steps_current(steps, expert.hash), expert.name) if steps else expert
    seen = {expert.hash} | {s.child for s in steps} | {s.parent for s in steps}
    # a simplification rejected once is not retried after unrelated steps: same family, function and code
    refused = {
        _refusal_key(s.transform, s.module, s.site["function"], s.site["before"]) for s in steps if not s.accepted
    }
    walk = Walk(workload, settings, device, sandbox, store, current, steps, seen, on_step=on_step)
    transforms = ordered_transforms()
    try:
        _gate_start(walk, expert)
        progress = True
        while progress and (max_steps is None or len(walk.steps) < max_steps):
            progress = _step(walk, transforms, refused, max_steps)
    finally:
        if own:
            sandbox.close()
    finished = max_steps is None or len(walk.steps) < max_steps
    lineage = Lineage(
        lid,
        workload.name,
        workload.hash,
        expert.name,
        expert.hash,
        device_name(device),
        versions(),
        walk.steps,
        finished,
    )
    store.write_lineage(lineage)
    return lineage


def _open_store(settings: Settings, lid: str, workload: Workload, expert: Program, device: str) -> LineageStore:
    """The lineage's record, set aside where the workload changed since, with its meta and the expert written."""
    store = LineageStore(settings.data_dir / "lineages" / lid)
    store.set_aside_if_workload_changed(workload.hash)
    store.write_meta(
        {
            "id": lid,
            "workload": str(workload.path),
            "workload_hash": workload.hash,
            "expert": expert.name,
            "device": device,
        }
    )
    store.save_program(expert)
    return store


def _gate_start(walk: Walk, expert: Program) -> None:
    """The expert must pass its own gates; what it compiled to and ran, and what the current program runs."""
    workload, settings, device, sandbox = walk.workload, walk.settings, walk.device, walk.sandbox
    expert_verdicts = check(workload, expert, settings, device, MINING_GATES, sandbox)
    if not expert_verdicts.passed:
        failed = [f"{v.gate}: {v.code} {v.reason}" for v in expert_verdicts.verdicts if not v.passed]
        raise MiningError(f"expert {expert.name} does not pass its own gates ({'; '.join(failed)})")
    walk.compiled[expert.hash] = expert_verdicts.verdict("compile")
    walk.ran[expert.hash] = expert_verdicts.functions_run()
    current = walk.current
    if current.hash not in walk.ran:  # resumed: what the current program runs (the verdict cache makes this cheap)
        walk.ran[current.hash] = check(workload, current, settings, device, MINING_GATES, sandbox).functions_run()


def _step(
    walk: Walk, transforms: list[Transform], refused: set[tuple[str, str, str, str]], max_steps: int | None
) -> bool:
    """Attempt the current program's untried simplifications in the walk's order until one is accepted (True: the
    walk goes on from the child) or none is left or the step cap is reached (False)."""
    for transform, module, site, child in candidates(walk.current, transforms, walk.ran.get(walk.current.hash)):
        key = _refusal_key(transform.id, module, site.function, site.before)
        if child.hash in walk.seen or key in refused:
            continue
        walk.seen.add(child.hash)
        if walk.attempt(child, transform, module, site).accepted:
            return True  # one family per step: list sites again from the child
        refused.add(key)
        if max_steps is not None and len(walk.steps) >= max_steps:
            break
    return False


def recorded_walk(
    workload: Workload, expert: Program, settings: Settings, device: str, max_steps: int | None = None
) -> Lineage:
    """The finished walk recorded for `expert` on `device`, read as it is: no gate runs. This is how a walk made on a
    machine without a GPU is taken to one (`klineage mine --walk-device cpu --device cuda`): the GPU box's own
    interpreter need not agree with the laptop's (on the H200's image, the interpreter failed three experts that
    pass on the CPU where they were walked: RESULTS.md#run-15), and nothing about the walk needs it again. With
    `max_steps`, a walk that made that many attempts counts as finished: it went as far as it was asked to (the
    same cap on both machines; on the H100, 26 of 32 walks capped at 3 steps were refused without it)."""
    lid = lineage_id(workload, expert, device)
    store = LineageStore(settings.data_dir / "lineages" / lid)
    lineage = store.lineage()
    hint = f"walk it first: klineage mine WORKLOAD EXPERT --device {device}"
    if lineage is None:
        raise MiningError(f"no walk of {expert.name} recorded on {device} in {settings.data_dir} ({hint})")
    if lineage.workload_hash != workload.hash:
        raise MiningError(
            f"the walk of {expert.name} recorded on {device} answered another version of workload "
            f"{workload.name} ({hint})"
        )
    if not walked_far_enough(lineage, max_steps):
        short = f", {len(lineage.steps)} attempts, fewer than --max-steps {max_steps}" if max_steps is not None else ""
        raise MiningError(f"the walk of {expert.name} recorded on {device} is unfinished{short} ({hint}; it resumes)")
    return lineage


def walked_far_enough(lineage: Lineage, max_steps: int | None) -> bool:
    """Finished, or stopped by the step cap it was given (`max_steps` attempts made)."""
    return lineage.finished or (max_steps is not None and len(lineage.steps) >= max_steps)


def walk_for(
    workload: Workload,
    expert: Program,
    settings: Settings,
    device: str,
    walk_device: str | None = None,
    sandbox: Sandbox | None = None,
    max_steps: int | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> Lineage:
    """The walk to time and probe on `device`: made there (`mine`, resumed where recorded), or, where `walk_device`
    differs, the finished walk recorded on that one (`recorded_walk`), whose effects the caller then takes on
    `device` (`retime`)."""
    if (walk_device or device) == device:
        return mine(workload, expert, settings, device, sandbox, max_steps=max_steps, on_step=on_step)
    return recorded_walk(workload, expert, settings, walk_device, max_steps)


def timed_on(step: Step, device: str) -> bool:
    """Whether a step's effect was taken on the device named `device` (a GPU's effect names it; a CPU walk's effect
    says no time was taken)."""
    return bool(step.effect.get("measured")) and step.effect.get("device") == device


def retime(
    lineage: Lineage,
    workload: Workload,
    settings: Settings,
    device: str,
    sandbox: Sandbox | None = None,
    keep_timed: bool = False,
) -> Lineage:
    """Measure every accepted step's effect again (parent and child interleaved, as the walk did), keeping the
    earlier measurement beside it: for effects first taken on a busy machine, or never taken because the walk ran on
    a machine without a GPU (a walk resumed on the CPU: `klineage mine --walk-device cpu --device cuda`); each effect
    names the GPU and versions that timed it (gates.profile_pair_job). The lineage's records are rewritten after
    every step, so a run stopped part way keeps what it timed; `keep_timed` skips the steps this GPU has timed
    already (a walk made on the CPU whose timing was cut short is resumed, not started again; another GPU's timings
    are taken again)."""
    if device != "cuda":
        raise MiningError("retiming needs a GPU: effects are never measured on the CPU")
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    store = LineageStore(settings.data_dir / "lineages" / lineage.id)
    steps = list(lineage.steps)
    here = device_name(device) if keep_timed else ""
    tuned: dict[str, dict] = {}
    try:
        for i, step in enumerate(lineage.steps):
            if not step.accepted or (keep_timed and timed_on(step, here)):
                continue
            parent = store.load_program(step.parent, lineage.expert)
            child = store.load_program(step.child, lineage.expert)
            timed = time_pair(workload, parent, child, settings, device, sandbox, parent_choices=tuned.get(parent.hash))
            if not timed.ok:
                continue  # the earlier measurement stands
            _known_choices(tuned, parent, child, timed.value)
            earlier = {k: v for k, v in step.effect.items() if k != "earlier"}
            effect = {**timed.value, "static_delta": step.effect.get("static_delta", {}), "earlier": earlier}
            steps[i] = replace(step, effect=effect)
            store.rewrite_steps(steps)
            store.write_lineage(replace(lineage, steps=steps))
    finally:
        if own:
            sandbox.close()
    return replace(lineage, steps=steps)


def _refusal_key(transform: str, module: str, function: str, before: str) -> tuple[str, str, str, str]:
    return (transform, module, function, before)


def steps_current(steps: list[Step], expert_hash: str) -> str:
    accepted = [s for s in steps if s.accepted]
    return accepted[-1].child if accepted else expert_hash


def _known_choices(tuned: dict[str, dict], parent: Program, child: Program, effect: dict) -> None:
    """What a timed pair's two programs' autotuners ran, kept for the next pair from either (`time_pair`'s
    `parent_choices`): the parent tunes in its first pair only, and its siblings' and the accepted child's pairs
    run those choices (gates.autotune.SettledTuners; on FlagGems's matmuls a pair took 18 s tuning and 3.4 s
    given, RESULTS.md#settle)."""
    for program, key in ((parent, "parent_autotuned"), (child, "child_autotuned")):
        if effect.get(key) and program.hash not in tuned:
            tuned[program.hash] = effect[key]


def _attempt(
    workload, parent, child, transform, module, site: Site, settings, device, sandbox, index, compiled, ran, tuned
):
    started = time.perf_counter()
    report = check(workload, child, settings, device, MINING_GATES, sandbox)
    accepted = report.passed
    ran[child.hash] = report.functions_run()
    compile_v = report.verdict("compile")
    compiled[child.hash] = compile_v
    if device == "cuda" and accepted:
        timed = time_pair(workload, parent, child, settings, device, sandbox, parent_choices=tuned.get(parent.hash))
        effect = timed.value if timed.ok else {"measured": False, "why": f"timing failed: {timed.error}"}
        _known_choices(tuned, parent, child, effect)
    elif device == "cuda":
        effect = {"measured": False, "why": "rejected: not timed"}
    else:
        effect = {"measured": False, "why": "no GPU: no time was taken"}
    effect["static_delta"] = static_delta(compiled.get(parent.hash), compile_v)
    return Step(
        index=index,
        transform=transform.id,
        module=module,
        site={**asdict(site), "params": site.params},
        parent=parent.hash,
        child=child.hash,
        accepted=accepted,
        verdicts=[
            {"gate": v.gate, "status": v.status, "code": v.code, "reason": clip(v.reason, 500)} for v in report.verdicts
        ],
        effect=effect,
        seconds=time.perf_counter() - started,
    )
