"""Mining with a model: simplifications beyond the mechanical catalog (`klineage mine --llm`).

After the mechanical backward walk stops, the walk goes on from its simplest program with a model proposing the
next simplification: it undoes one optimization that no catalog transform knows (an online softmax made two-pass,
a fused epilogue split off, ...), states the optimization's intent and names predicates it may depend on. Each
proposal is a step like any other: gated (compile + correctness on every case), timed against its parent on a GPU,
accepted or rejected. A reply that cannot be a program never reaches the gates; it is counted and the model asked
again, within `max_calls`.

Accepted steps become skills of transform `llm_rewrite` (tag L): the accepted diff is the skill's location, the
model's stated intent its intent; the conditions come from probing, as for every skill (the predicates the model
named, plus `PROBED_ALWAYS`), never from the model's word. Rejected model rewrites are not guard skills: a wrong
rewrite says nothing about what the expert's code needs.

The model's steps live in their own lineage, `<mechanical lineage id>-llm`, starting at the mechanical walk's
simplest program, appended and fsynced like the mechanical walk's, so an interrupted run resumes."""

from __future__ import annotations

import ast
import datetime
import difflib
from collections.abc import Callable
from dataclasses import dataclass

from klineage.check import check
from klineage.config import Settings
from klineage.llm import Failure, LLMClient, kernel_names, parse_program, says_none, simplify_messages
from klineage.mine import MINING_GATES, Lineage, LineageStore, Step, Walk
from klineage.probing import probe_step
from klineage.sandbox import Sandbox
from klineage.skills import Skill, optimization_skill
from klineage.transform import Site
from klineage.workload import Workload

LLM_TRANSFORM = "llm_rewrite"
PROBED_ALWAYS = ("divisible_by_block",)  # probed on every model step besides the predicates the model names
SNIPPET_LINES = 40


@dataclass(frozen=True)
class _Rewrite:
    """What `mine.Walk.attempt` and `skills.optimization_skill` read off a transform class, for one model step."""

    intent: str
    conditions: tuple[str, ...]
    id: str = LLM_TRANSFORM
    family: int = 0  # outside the catalog
    tag: str = "L"


def llm_lineage_id(lineage: Lineage) -> str:
    return f"{lineage.id}-llm"


def _site(parent: str, child: str, intent: str, named: tuple[str, ...]) -> Site:
    """The changed region: the first changed line of the parent, the function around it, the changed lines."""
    a, b = parent.splitlines(), child.splitlines()
    opcodes = [op for op in difflib.SequenceMatcher(None, a, b).get_opcodes() if op[0] != "equal"]
    first = opcodes[0][1] if opcodes else 0
    before = [line for op in opcodes for line in a[op[1] : op[2]]][:SNIPPET_LINES]
    after = [line for op in opcodes for line in b[op[3] : op[4]]][:SNIPPET_LINES]
    function = "<module>"
    for node in ast.walk(ast.parse(parent)):
        if isinstance(node, ast.FunctionDef) and node.lineno <= first + 1 <= (node.end_lineno or node.lineno):
            function = node.name  # innermost wins: ast.walk visits outer functions first
    diff = "".join(difflib.unified_diff([x + "\n" for x in b], [x + "\n" for x in a], "simple", "optimized"))
    return Site(
        LLM_TRANSFORM,
        function,
        0,
        first + 1,
        "\n".join(before),
        "\n".join(after),
        {"intent": intent, "conditions": list(named), "diff": diff[:20_000]},
    )


def mine_with_llm(
    workload: Workload,
    lineage: Lineage,
    client: LLMClient,
    settings: Settings,
    device: str = "cpu",
    sandbox: Sandbox | None = None,
    max_steps: int = 4,
    on_step: Callable[[Step], None] | None = None,
) -> Lineage:
    """Continue the backward walk from `lineage`'s simplest program with model-proposed steps (at most `max_steps`
    attempts reach the gates; the client's caps bound the calls)."""
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    walk = _resume(workload, lineage, client, settings, device, sandbox, on_step)
    undone = sorted({s.transform for s in lineage.accepted})
    tried = [
        f"{s.site['params'].get('intent') or 'a rewrite'} ({'accepted' if s.accepted else 'failed the gates'})"
        for s in walk.steps
    ]
    try:
        base = check(workload, walk.current, settings, device, MINING_GATES, sandbox)
        walk.compiled[walk.current.hash] = base.verdict("compile")
        walk.ran[walk.current.hash] = base.functions_run()
        going = True
        while going and len(walk.steps) < max_steps and not client.exhausted():
            going = _model_step(walk, client, undone, tried)
    finally:
        if own:
            sandbox.close()
    out = Lineage(
        llm_lineage_id(lineage),
        lineage.workload,
        lineage.workload_hash,
        lineage.expert,
        lineage.expert_hash,
        lineage.device,
        lineage.versions,
        walk.steps,
        True,
    )
    walk.store.write_lineage(out)
    return out


def _resume(workload, lineage, client, settings, device, sandbox, on_step) -> Walk:
    """The model's walk, starting at the mechanical walk's simplest program, where its record stops."""
    mechanical = LineageStore(settings.data_dir / "lineages" / lineage.id)
    start = mechanical.load_program(lineage.simplest, lineage.expert)
    lid = llm_lineage_id(lineage)
    store = LineageStore(settings.data_dir / "lineages" / lid)
    store.write_meta(
        {
            "id": lid,
            "after": lineage.id,
            "workload": str(workload.path),
            "expert": lineage.expert,
            "device": device,
            "model": client.config.model,
        }
    )
    store.save_program(start)
    steps = store.steps()
    accepted = [s for s in steps if s.accepted]
    current = store.load_program(accepted[-1].child, lineage.expert) if accepted else start
    seen = {start.hash} | {s.child for s in steps}
    return Walk(workload, settings, device, sandbox, store, current, steps, seen, on_step=on_step)


def _model_step(walk: Walk, client: LLMClient, undone: list[str], tried: list[str]) -> bool:
    """Ask the model for the next simplification and gate it. False when the model says none is left; a reply that
    cannot be a program, or one already seen, is counted against the model and never reaches the gates."""
    current = walk.current
    module, source = next(((m, s) for m, s in current.module_sources() if kernel_names(s)), ("program", current.source))
    reply = client.chat(simplify_messages(module, source, undone, tried))
    if says_none(reply):
        return False
    parsed = parse_program(reply, source, module == "program", client.config.max_reply_chars)
    if isinstance(parsed, Failure):
        if parsed.reason != "capped":
            client.reject(parsed.reason)
            tried.append(f"(an unusable reply: {parsed.reason})")
        return True
    child = current.rewritten_by("model", module, parsed.source)  # the static policy judges what it changed
    if child.hash in walk.seen:
        client.reject("repeat")
        return True
    walk.seen.add(child.hash)
    named = tuple(dict.fromkeys((*parsed.conditions, *PROBED_ALWAYS)))
    rewrite = _Rewrite(parsed.intent or "an optimization the model undid (no intent stated)", named)
    site = _site(source, parsed.source, rewrite.intent, parsed.conditions)
    step = walk.attempt(child, rewrite, module, site)
    tried.append(f"{rewrite.intent} ({'accepted' if step.accepted else 'failed the gates'})")
    if not step.accepted:
        client.reject(f"gate:{next((v['code'] for v in step.verdicts if v['status'] != 'pass'), 'failed')}")
    return True


def probe_llm_lineage(
    lineage: Lineage, workload: Workload, settings: Settings, device: str, sandbox: Sandbox | None = None
) -> dict[int, list[dict]]:
    """Probe each accepted model step on the predicates the model named plus PROBED_ALWAYS."""
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    store = LineageStore(settings.data_dir / "lineages" / lineage.id)
    out = {}
    try:
        for step in lineage.accepted:
            parent = store.load_program(step.parent, lineage.expert)
            child = store.load_program(step.child, lineage.expert)
            named = tuple(dict.fromkeys((*step.site["params"].get("conditions", []), *PROBED_ALWAYS)))
            results = probe_step(workload, parent, child, step, named, settings, device, sandbox)
            out[step.index] = [r.as_condition() | {"parent": r.parent, "child": r.child} for r in results]
    finally:
        if own:
            sandbox.close()
    return out


def llm_skills(lineage: Lineage, probes: dict[int, list[dict]] | None = None) -> list[Skill]:
    """One optimization skill of transform `llm_rewrite` per accepted model step: the model's intent, the accepted
    diff as the location (optimize direction), the conditions from probing."""
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    skills = []
    for step in lineage.accepted:
        params = step.site["params"]
        named = tuple(dict.fromkeys((*params.get("conditions", []), *PROBED_ALWAYS)))
        rewrite = _Rewrite(params.get("intent") or "an optimization the model undid", named)
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
            "proposed_by": "model",
        }
        skills.append(optimization_skill(step, rewrite, provenance, (probes or {}).get(step.index)))
    return skills


__all__ = ["LLM_TRANSFORM", "PROBED_ALWAYS", "llm_lineage_id", "llm_skills", "mine_with_llm", "probe_llm_lineage"]
