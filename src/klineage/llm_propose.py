"""The `llm` materializer: a language model writes candidates where the mechanical rewrites cannot, and repairs a
candidate that failed a gate. Everything it writes goes through the same gates as any other candidate.

`LLMProposer` wraps a method's proposer. Each round it first offers the wrapped proposer's mechanical candidates
(unless `mechanical=False`), then asks the model to materialize each piece of **guidance** that produced none:

- `--method klineage`: the library's skill cards, in lineage order (a curriculum: per lineage, from the simplest
  program's first optimization back up to the expert's form), each skill's conditions decided against the
  workload's domain first. A skill whose conditions never hold is refused without a model call; one that holds on
  part of the domain is sent with that condition, so the model keeps a fallback path. These are skills whose sites
  do not match syntactically, skills of [L] families and skills mined by a model (transform `llm_rewrite`).
- `--method memory`: the memory baseline's retrieved notes (past outcomes by program-feature similarity), no
  conditions.

When a candidate fails a gate, `observe` asks the model to repair it (at most `repairs` times in a row) while gate
evaluations are left; the repair is gated next. Model calls and tokens are capped by the client (`LLMClient`), and
the accounting goes into the trajectory (`llm_usage`).

The paper's comparison (klineage.llm_compare) runs two of these with `mechanical=False`: the same model, prompts
and budget, with skills as the curriculum against the memory baseline's notes."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from klineage.llm import (
    Failure,
    LLMClient,
    Parsed,
    ask_program,
    kernel_names,
    materialize_messages,
    repair_messages,
    skill_guidance,
)
from klineage.llm_mine import LLM_TRANSFORM
from klineage.program import Program
from klineage.proposers import (
    Candidate,
    MemoryEntry,
    MemoryProposer,
    Proposer,
    Refusal,
    SkillProposer,
    features,
    screen,
    similarity,
)
from klineage.skills import Skill
from klineage.transform import TRANSFORMS, load_families

MEMORY_NOTES = 8  # retrieved notes offered to the model per round


@dataclass(frozen=True)
class Guidance:
    """One thing the model is asked to apply: a skill card or a remembered note."""

    origin: str  # skill id or memory:<index>
    transform: str
    text: str
    expected: float
    decided_by: tuple[str, ...] = ()
    site: str = ""  # where it was found (the expert's function and construct), for the prompt


def curriculum(skills: list[Skill]) -> list[Skill]:
    """Optimization skills in lineage order: per lineage, the last step the backward walk undid first (the forward
    direction, from the simplest program toward the expert's)."""
    chosen = [s for s in skills if s.kind == "optimization"]
    return sorted(chosen, key=lambda s: (str(s.provenance.get("lineage", "")), -int(s.provenance.get("step", 0)), s.id))


def _kernel_module(program: Program) -> tuple[str, str, list[str]]:
    """The module the model edits: the first (main first) that defines Triton kernels, with their names."""
    for module, source in program.module_sources():
        names = sorted(kernel_names(source))
        if names:
            return module, source, names
    return "program", program.source, []


class LLMProposer(Proposer):
    """A method's proposer with a model materializing its guidance and repairing failed candidates."""

    def __init__(
        self,
        base: Proposer,
        client: LLMClient,
        guidance: Callable[[Program], list[Guidance]],
        mechanical: bool = True,
        repairs: int = 1,
    ):
        super().__init__(base.workload, base.settings, base.device)
        self.method = base.method
        self.base, self.client, self.guidance = base, client, guidance
        self.mechanical, self.repairs = mechanical, repairs
        self.refusals = base.refusals  # one list: refusals of either show in the trajectory
        self.asked: set[str] = set()  # guidance origins the model was asked to materialize (once per run)
        self.applied: set[str] = set()  # origins of kept candidates
        self.made: dict[str, int] = {}  # hash of a model-written candidate -> repair depth

    def propose(self, program: Program) -> Iterator[Candidate]:
        mechanical = self.base.propose(program) if self.mechanical else []
        yield from mechanical
        covered = {c.origin for c in mechanical} | {r.origin for r in self.refusals}
        for item in self.guidance(program):
            if item.origin in covered or item.origin in self.applied or item.origin in self.asked:
                continue
            if self.client.exhausted():
                return
            self.asked.add(item.origin)
            candidate = self._materialize(program, item)
            if candidate is not None:
                yield candidate

    def _materialize(self, program: Program, item: Guidance) -> Candidate | None:
        module, source, kernels = _kernel_module(program)
        site = f"Kernels in this module: {', '.join(f'`{k}`' for k in kernels) or 'none found'}. " + (
            f"In the expert's program it was found at {item.site}; apply it at the corresponding place here."
            if item.site
            else "Apply it where it fits."
        )
        messages = materialize_messages(item.text, module, source, site, self.workload.domain, item.decided_by)
        parsed = ask_program(self.client, messages, source, main=module == "program")
        if isinstance(parsed, Failure):
            return None
        return self._candidate(
            program,
            module,
            parsed,
            f"llm: {item.transform} from {item.origin}",
            item.origin,
            item.transform,
            item.expected,
            item.decided_by,
            0,
        )

    def _candidate(self, program, module, parsed: Parsed, label, origin, transform, expected, decided_by, depth):
        new = program.rewritten_by("model", module, parsed.source)  # the static policy judges what it changed
        self.made[new.hash] = depth
        kernel = next(iter(sorted(kernel_names(parsed.source))), "")
        params = {"materializer": "llm", "intent": parsed.intent} if parsed.intent else {"materializer": "llm"}
        return Candidate(label[:100], origin, transform, module, kernel, params, expected, "", decided_by, new)

    def worth(self, candidate: Candidate) -> bool:
        return self.base.worth(candidate)

    def observe(self, attempt, evaluations_left: int) -> Candidate | None:
        """Count what the gates did to model-written candidates; repair a failed candidate while budget is left.
        The base proposer sees its own (mechanical) candidates' attempts."""
        cand = attempt.candidate
        written = cand.program.hash in self.made
        if not written and (follow := self.base.observe(attempt, evaluations_left)) is not None:
            return follow
        if attempt.kept:
            self.applied.add(cand.origin)
            return None
        if attempt.outcome != "failed_gate":
            return None
        failed = next((v for v in attempt.verdicts if v["status"] in ("fail", "error")), None)
        if written:
            self.client.reject(f"gate:{failed['code'] if failed else 'failed'}")
        depth = self.made.get(cand.program.hash, 0) + 1  # the repair's: one more than the candidate it repairs
        if failed is None or depth > self.repairs or evaluations_left < 1 or self.client.exhausted():
            return None
        module = cand.module if cand.module in dict(cand.program.module_sources()) else "program"
        source = dict(cand.program.module_sources())[module]
        messages = repair_messages(module, source, failed["gate"], failed["code"], failed["reason"], cand.label)
        parsed = ask_program(self.client, messages, source, main=module == "program")
        if isinstance(parsed, Failure):
            return None
        label = cand.label if cand.label.startswith("repair of ") else f"repair of {cand.label}"
        return self._candidate(
            cand.program, module, parsed, label, cand.origin, cand.transform, cand.expected, cand.decided_by, depth
        )

    def evidence(self) -> dict | None:
        return self.base.evidence()  # the model materializes the base method's guidance: its evidence is the base's

    def llm_usage(self) -> dict:
        return self.client.usage.as_dict()


# --- guidance ----------------------------------------------------------------------------------------------------


def skill_guidance_for(proposer: SkillProposer, skills: list[Skill]) -> Callable[[Program], list[Guidance]]:
    """Skill cards in lineage order, each skill's conditions decided against the domain for this program; a skill
    whose conditions never hold (or that the domain does not need, for a robustness family) is refused."""
    ordered = curriculum(skills)
    seen_refusals: set[tuple[str, str]] = set()

    def refuse(skill: Skill, predicate: str, reason: str) -> None:
        if (skill.id, predicate) not in seen_refusals:
            seen_refusals.add((skill.id, predicate))
            proposer.refusals.append(Refusal(skill.id, skill.transform["id"], "(model)", predicate, reason))

    def guidance(program: Program) -> list[Guidance]:
        _, source, kernels = _kernel_module(program)
        kernel = kernels[0] if len(kernels) == 1 else None
        out = []
        for skill in ordered:
            if _already_there(skill, source):
                continue
            found = screen(skill, proposer.workload, source, kernel, proposer.device, proposer.settings.target)
            if found.refusal is not None:
                refuse(skill, *found.refusal)
                continue
            decided = found.decided_by
            loc = skill.location
            site = f"`{loc.get('function', '?')}` ({loc.get('construct', skill.transform['id'])})"
            out.append(
                Guidance(
                    skill.id, skill.transform["id"], skill_guidance(skill), proposer.expected(skill), decided, site
                )
            )
        return out

    return guidance


def _already_there(skill: Skill, source: str) -> bool:
    """The skill's family is a catalog transform whose expert form this program already has (its backward
    `sites` match): nothing for the model to add."""
    load_families()
    cls = TRANSFORMS.get(skill.transform["id"])
    if cls is None:
        return False
    try:
        return bool(cls().sites(source))
    except Exception:
        return False


def memory_note(index: int, entry: MemoryEntry) -> str:
    load_families()
    cls = TRANSFORMS.get(entry.transform)
    present = ", ".join(k for k, v in sorted(entry.features.items()) if v) or "none"
    outcome = "passed the gates" if entry.passed else "failed a gate"
    speed = f", measured x{entry.speedup:.3f}" if entry.speedup else ", not timed"
    params = ", ".join(f"{k}={v}" for k, v in entry.params.items()) or "defaults"
    intent = f" ({cls.intent})" if cls is not None else ""
    return (
        f"Remembered outcome #{index} (from {entry.source}): `{entry.transform}`{intent} applied with {params} "
        f"to a program with features [{present}] {outcome}{speed}."
    )


def memory_guidance_for(proposer: MemoryProposer, limit: int = MEMORY_NOTES) -> Callable[[Program], list[Guidance]]:
    """The memory baseline's retrieval (feature similarity x observed outcome) rendered as notes; no conditions."""

    def guidance(program: Program) -> list[Guidance]:
        here = features(program, proposer.workload)
        ranked = []
        for i, entry in enumerate(proposer.memory):
            score = similarity(here, entry.features) * math.log(
                max(entry.speedup or 1.0, 1e-3) + (0.01 if entry.passed else -1)
            )
            if score > 0:
                ranked.append((score, i, entry))
        ranked.sort(key=lambda t: -t[0])
        return [
            Guidance(f"memory:{i}", e.transform, memory_note(i, e), math.exp(score)) for score, i, e in ranked[:limit]
        ]

    return guidance


def llm_proposer(base: Proposer, client: LLMClient, mechanical: bool = True, repairs: int = 1) -> LLMProposer:
    """Wrap a klineage (skills) or memory (notes) proposer."""
    from klineage.workload import UserError

    if isinstance(base, SkillProposer):
        guidance = skill_guidance_for(base, base.skills)
    elif isinstance(base, MemoryProposer):
        guidance = memory_guidance_for(base)
    else:
        raise UserError(f"--materializer llm: works with --method klineage or memory, not {base.method}")
    return LLMProposer(base, client, guidance, mechanical, repairs)


__all__ = [
    "LLM_TRANSFORM",
    "Guidance",
    "LLMProposer",
    "curriculum",
    "llm_proposer",
    "memory_guidance_for",
    "memory_note",
    "skill_guidance_for",
]
