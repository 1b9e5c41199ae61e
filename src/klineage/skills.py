"""Skills: reversed steps of a lineage. An accepted step (the simpler program still passed) read backward is an
optimization skill: where it applies, what the expert chose, the conditions worth checking, the effect it had. A
rejected step is a guard skill: "keep this; removing it breaks X", with the verdict that showed it.

Skills are schema-versioned JSON records, rendered as Markdown cards and as agent-skill `SKILL.md` files."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from klineage.mine import Lineage, Step
from klineage.transform import CONDITIONS, TRANSFORMS, load_families

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Skill:
    id: str
    name: str
    family: int
    kind: str  # "optimization" | "guard"
    intent: str
    transform: dict  # {"id", "tag", "params"}: what to apply and with which of the expert's parameters
    location: dict  # {"module", "function", "line", "construct", "before", "after"} in the optimize direction
    conditions: list[dict] = field(default_factory=list)  # {"predicate", "description", "status", "evidence"}
    effect: dict = field(default_factory=dict)  # per device: measured times and spread, or why unmeasured
    failures: list[dict] = field(default_factory=list)  # {"violated", "gate", "code", "detail", "case"}
    provenance: dict = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def as_dict(self) -> dict:
        return asdict(self)

    def timed_devices(self) -> list[str]:
        """The devices whose effect entry holds a measurement (a GPU's name; none for a walk never timed)."""
        return [device for device, e in self.effect.items() if e.get("measured")]

    @staticmethod
    def from_dict(d: dict) -> Skill:
        problem = skill_problem(d)
        if problem is not None:
            raise ValueError(f"skill {d.get('id') if isinstance(d, dict) else '?'}: {problem}")
        return Skill(**d)


# --- reading a skill file -----------------------------------------------------------------------------------------

# What the index, the cards, SKILL.md and the proposers read of a skill: a record without one of these is damaged
# (a hand edit, a file cut short, another tool's JSON), and reading it is one line naming the file, never a traceback
# from deep inside a proposer or the card.
FIELDS = {
    "id": str,
    "name": str,
    "family": int,
    "kind": str,
    "intent": str,
    "transform": dict,
    "location": dict,
    "conditions": list,
    "effect": dict,
    "failures": list,
    "provenance": dict,
    "schema": int,
}
KINDS = ("optimization", "guard")
NESTED = {
    "transform": ("id", "tag", "params"),
    "location": ("module", "function", "line", "construct", "before", "after"),
    "provenance": ("expert", "expert_hash", "workload", "lineage", "step", "device", "versions", "date"),
}
ITEMS = {
    "conditions": ("predicate", "description", "status", "evidence"),
    "failures": ("violated", "gate", "code", "detail", "case"),
}
MEASURED = ("case", "parent_ms", "child_ms", "speedup", "parent_spread", "child_spread")  # a timed effect's card


@dataclass(frozen=True)
class SkillDamage:
    """A skill file that does not hold a skill: which file, and what is wrong with it."""

    path: Path
    problem: str

    def line(self) -> str:
        return f"skill file {self.path} is damaged: {self.problem}"


def _json_kind(value) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "an integer"}
    return "null" if value is None else names.get(type(value), "a number" if isinstance(value, float) else "?")


def _fields_problem(d: dict) -> str | None:
    missing = [k for k in FIELDS if k not in d]
    if missing:
        return f"missing field{'s' * (len(missing) > 1)} {', '.join(missing)}"
    unknown = sorted(k for k in d if k not in FIELDS)
    if unknown:
        return f"unknown field{'s' * (len(unknown) > 1)} {', '.join(unknown)}"
    for name, kind in FIELDS.items():
        if not isinstance(d[name], kind) or isinstance(d[name], bool):
            return f"field {name} is {_json_kind(d[name])}, expected {_json_kind(kind())}"
    return None


def skill_problem(d) -> str | None:
    """What keeps the JSON value `d` from being a skill this version reads, or None."""
    if not isinstance(d, dict):
        return f"the file holds {_json_kind(d)}, not a skill object"
    if d.get("schema") != SCHEMA_VERSION:
        return f"schema {d.get('schema')!r}, this KLineage reads schema {SCHEMA_VERSION}"
    problem = _fields_problem(d)
    if problem is not None:
        return problem
    if d["kind"] not in KINDS:
        return f"kind {d['kind']!r}, expected one of {', '.join(KINDS)}"
    for name, keys in NESTED.items():
        lacking = [k for k in keys if k not in d[name]]
        if lacking:
            return f"{name} lacks {', '.join(lacking)}"
    if not isinstance(d["transform"]["id"], str) or not isinstance(d["transform"]["params"], dict):
        return "transform's id is not a string or its params not an object"
    for name, keys in ITEMS.items():
        for i, item in enumerate(d[name]):
            lacking = [k for k in keys if k not in item] if isinstance(item, dict) else list(keys)
            if lacking:
                return f"{name}[{i}] lacks {', '.join(lacking)}"
    for device, effect in d["effect"].items():
        if not isinstance(effect, dict):
            return f"effect on {device} is {_json_kind(effect)}, expected an object"
        lacking = ["case"] * ("case" not in effect) + [
            k for k in MEASURED[1:] if type(effect.get(k)) not in (int, float)
        ]
        if effect.get("measured") and lacking:
            return f"effect on {device} is marked measured but lacks a value for {', '.join(lacking)}"
    return None


def load_skill(path: Path) -> Skill | SkillDamage:
    """The skill in the file `path` (`<library>/skills/<id>.json`), or what keeps it from being one. The one way a
    skill file is read."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return SkillDamage(path, "no such file")
    except (OSError, UnicodeDecodeError) as e:
        return SkillDamage(path, f"cannot be read ({e})")
    if not text.strip():
        return SkillDamage(path, "the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return SkillDamage(path, f"not valid JSON ({e})")
    problem = skill_problem(data)
    if problem is None and data["id"] != path.stem:
        problem = f"it holds skill {data['id']!r}, not the {path.stem!r} its file name says"
    return SkillDamage(path, problem) if problem else Skill(**data)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def skills_from_lineage(
    lineage: Lineage,
    probes: dict[int, list[dict]] | None = None,
    context: dict[str, float] | None = None,
    tile_rank: int | None = None,
) -> list[Skill]:
    """One optimization skill per accepted step (its conditions from `probes` where the step was probed), one guard
    skill per rejected step. `context`: the expert's features (klineage.features), and `tile_rank`: the most tile
    sizes one of its kernels takes (klineage.likeness.tile_rank), recorded in the provenance so a forward walk can
    tell how alike a target is."""
    load_families()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    skills = []
    for step in lineage.steps:
        cls = TRANSFORMS.get(step.transform)
        if cls is None:
            continue
        provenance = {
            "expert": lineage.expert,
            "expert_hash": lineage.expert_hash,
            "workload": lineage.workload,
            "workload_hash": lineage.workload_hash,
            "lineage": lineage.id,
            "step": step.index,
            "parent_hash": step.parent,
            "child_hash": step.child,
            "device": lineage.device,
            "versions": lineage.versions,
            "date": date,
        }
        if context:
            provenance["features"] = context
        if tile_rank is not None:
            provenance["tile_rank"] = tile_rank
        if step.accepted:
            skills.append(optimization_skill(step, cls, provenance, (probes or {}).get(step.index)))
        else:
            skills.append(guard_skill(step, cls, provenance))
    return skills


def _location(step: Step, cls, optimize_direction: bool) -> dict:
    site = step.site
    before, after = (site["after"], site["before"]) if optimize_direction else (site["before"], site["after"])
    return {
        "module": step.module,
        "function": site["function"],
        "line": site["line"],
        "construct": cls.id,
        "before": before,
        "after": after,
    }


def optimization_skill(step: Step, cls, provenance: dict, probed: list[dict] | None) -> Skill:
    if probed is None:
        conditions = [
            {
                "predicate": name,
                "description": CONDITIONS[name],
                "status": "unprobed",
                "evidence": "not probed: the predicate comes from the family's vocabulary",
            }
            for name in cls.conditions
        ]
    else:
        conditions = [{k: c[k] for k in ("predicate", "description", "status", "evidence", "probe")} for c in probed]
    # a counterexample either breaks the optimized form (a condition: the failure its assumptions avoid, where they
    # hold) or the simple one (required: the failure that applying the optimization avoids)
    broken = {"condition": ("parent", "optimized"), "required": ("child", "simple")}
    failures = [
        {
            "violated": c["predicate"],
            "gate": "correctness",
            "code": c[broken[c["status"]][0]]["code"],
            "detail": c[broken[c["status"]][0]]["reason"],
            "case": c["probe"].get("name", ""),
            "breaks": broken[c["status"]][1],
        }
        for c in probed or []
        if c["status"] in broken
    ]
    # keyed by the device that timed the step: the walk's own, or the GPU that retimed a walk made on the CPU
    measured_on = step.effect.get("device", provenance["device"])
    effect = {measured_on: {"case": step.effect.get("case", "bench"), **step.effect}}
    return Skill(
        id=f"{cls.id}.{_slug(provenance['workload'])}.{_slug(provenance['expert'])}.s{step.index}",
        name=f"{cls.id.replace('_', ' ')} in {step.site['function']}",
        family=cls.family,
        kind="optimization",
        intent=cls.intent,
        transform={"id": cls.id, "tag": cls.tag, "params": step.site.get("params", {})},
        location=_location(step, cls, optimize_direction=True),
        conditions=conditions,
        effect=effect,
        failures=failures,
        provenance=provenance,
    )


def guard_skill(step: Step, cls, provenance: dict) -> Skill:
    failed = next((v for v in step.verdicts if v["status"] != "pass"), {"gate": "?", "code": "?", "reason": ""})
    return Skill(
        id=f"guard.{cls.id}.{_slug(provenance['workload'])}.{_slug(provenance['expert'])}.s{step.index}",
        name=f"keep {cls.id.replace('_', ' ')} in {step.site['function']}",
        family=cls.family,
        kind="guard",
        intent=f"Keep this {cls.id.replace('_', ' ')}: removing it fails the {failed['gate']} gate ({failed['code']}).",
        transform={"id": cls.id, "tag": cls.tag, "params": step.site.get("params", {})},
        location=_location(step, cls, optimize_direction=False),
        # a rejected step has no correct simple form to time against: the effect says so, never a number
        effect={
            provenance["device"]: {
                "case": "bench",
                "measured": False,
                "why": f"a guard: without it the {failed['gate']} gate fails "
                f"({failed['code']}), so there is no correct version to time",
            }
        },
        failures=[
            {
                "violated": "removal of the construct",
                "gate": failed["gate"],
                "code": failed["code"],
                "detail": failed["reason"],
                "case": "the workload's check cases",
            }
        ],
        provenance=provenance,
    )


# --- rendering ----------------------------------------------------------------------------------------------------


def card(skill: Skill) -> str:
    """The Markdown card: what a reader (or a model) needs to apply the skill and to trust it."""
    loc = skill.location
    lines = [
        f"# {skill.name}",
        "",
        f"`{skill.id}` ({skill.kind}; family {skill.family}, transform "
        f"`{skill.transform['id']}`, tag {skill.transform['tag']})",
        "",
        "## Intent",
        "",
        skill.intent,
        "",
        "## Where it applies",
        "",
        f"In `{loc['function']}` ({loc['module']}, line {loc['line']}):",
        "",
        "```python",
        f"# before\n{loc['before']}\n# after\n{loc['after']}",
        "```",
        "",
    ]
    params = skill.transform["params"]
    if params:
        lines += ["Parameters the expert used: " + ", ".join(f"`{k}={v}`" for k, v in params.items()), ""]
    lines += ["## Conditions", ""]
    lines += [f"- `{c['predicate']}`: {c['description']} ({c['status']}; {c['evidence']})" for c in skill.conditions]
    lines += ["- none recorded"] if not skill.conditions else []
    lines += ["", "## Effect", ""]
    for device, effect in skill.effect.items():
        if effect.get("measured"):
            lines.append(
                f"- {device}, case {effect['case']}: {effect['parent_ms']:.4g} ms with it, "
                f"{effect['child_ms']:.4g} ms without (x{effect['speedup']:.3f}, spreads "
                f"{effect['parent_spread']:.1%} / {effect['child_spread']:.1%})"
            )
        else:
            lines.append(f"- {device}: not measured ({effect.get('why', 'no timing')})")
        if effect.get("static_delta"):
            delta = ", ".join(f"{k} {-v:+g}" for k, v in effect["static_delta"].items() if v)
            lines.append(f"  - static metrics with the optimization: {delta or 'unchanged'}")
    lines += ["", "## Failures avoided", ""]
    broke = {
        "optimized": " (breaks the optimized form)",
        "simple": " (breaks the simple form; the optimization handles it)",
    }
    lines += [
        f"- {f['violated']}{broke.get(f.get('breaks'), '')}: {f['gate']} gate `{f['code']}` on "
        f"{f['case'] or 'the check cases'}: {f['detail']}"
        for f in skill.failures
    ]
    probed = skill.conditions and all(c["status"] != "unprobed" for c in skill.conditions)
    if not skill.failures:
        lines.append("- none found by probing" if probed else "- none recorded (conditions not probed)")
    p = skill.provenance
    origin = f"Expert `{p['expert']}` ({p['expert_hash']}) on workload `{p['workload']}`, lineage `{p['lineage']}`"
    lines += ["", "## Provenance", "", f"{origin} step {p['step']}; {p['device']}; {p['versions']}; {p['date']}.", ""]
    return "\n".join(lines)


def skill_md(skill: Skill) -> str:
    """An Agent Skills `SKILL.md`: YAML front matter `name` and `description`, then the card's body."""
    name = _slug(skill.id)
    if len(name) > 64:  # the spec's limit; a hash of the id keeps two long ids with one prefix apart
        name = name[:55].strip("-") + "-" + hashlib.sha256(skill.id.encode()).hexdigest()[:8]
    description = f"{skill.intent} Applies to {skill.location['construct'].replace('_', ' ')} sites in Triton kernels."
    description = description.replace("\n", " ")[:1024]
    body = card(skill)
    return f"---\nname: {name}\ndescription: {_yaml_str(description)}\n---\n\n{body}"


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
