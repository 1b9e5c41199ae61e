"""`klineage mcp`: the skill library and the gates as an MCP server (stdio), so any MCP-capable coding agent can
use verified skills and the hardened gates.

Tools:
- `search_skills`: filter the library by words (id, name, intent, where it applies), family, condition predicate,
  kind or transform;
- `suggest_skills`: for a program and a workload, which skills apply where, with each skill's conditions decided
  against the workload's domain (apply, apply behind a launch-time guard, or refused and why), and which skills
  have no site here that a mechanical rewrite can match;
- `apply_skill`: apply one skill to a program (mechanically, conditions decided as above); the new source and its
  diff, optionally gated;
- `check_program`: the gates (compile, correctness, profile) on a program; the verdicts.

Resources: every skill's Markdown card as `skill://<id>`.

Programs are given as a path (a file, or a directory with program.py and modules/) or as source text; workloads as
a path. The tool functions are plain Python here (`Tools`), so they are testable without a client; `build_server`
registers them with the official MCP Python SDK, imported only when the server is started."""

from __future__ import annotations

import atexit
import difflib
import functools
import re
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

from klineage.check import check, resolve_device
from klineage.config import Settings
from klineage.gates import GATES
from klineage.library import Library
from klineage.program import Program, load_program
from klineage.proposers import SkillProposer
from klineage.sandbox import Sandbox
from klineage.skills import Skill, card
from klineage.workload import UserError, load_workload

INSTRUCTIONS = """KLineage: optimization skills mined from expert Triton kernels, each with the conditions under which
it is valid (checked against a workload's input domain), its measured effect and the failures it avoids; and hardened
gates (compile, correctness against a float64 reference on fresh seeds with anti-cheat checks, profile).
Typical use: suggest_skills for your program and workload, read a skill's card (skill://<id>), apply_skill or edit
the program yourself, then check_program: a candidate counts only when it passes the gates."""

DESCRIPTIONS = {
    "search_skills": "Search the skill library. `query`: words matched in a skill's id, name, intent and location; "
    "filters: `family` (catalog number), `condition` (a predicate such as divisible_by_block), `kind` (optimization "
    "or guard), `transform`.",
    "suggest_skills": "Which skills apply to a program for a workload: candidates (conditions decided against the "
    "workload's input domain, with a launch guard where they hold on part of it), refusals with reasons, and skills "
    "with no matching site. `workload`: path to a workload file; `program`: path to a program, or `source`: its text.",
    "apply_skill": "Apply one skill (by id) to a program: the new source and its diff. `choice` picks among several "
    "sites or parameter variants; `gate=true` also runs the compile and correctness gates on the result.",
    "check_program": "Run KLineage's gates on a program against a workload: compile, correctness (float64 reference, "
    "fresh seeds, anti-cheat checks) and profile (GPU only). Returns every verdict with its reason and metrics; "
    "`passed` says whether the program counts. What you hand in is judged first by a static policy (imports: torch, "
    "triton, math and a few helpers only; no dynamic code, computed attribute access or host reads of tensor data): "
    "a refusal is a `static_ban` verdict naming the rule and the line, and `policy` lists every finding.",
}


def _summary(skill: Skill) -> dict:
    measured = [{"device": d, "speedup": e.get("speedup")} for d, e in skill.effect.items() if e.get("measured")]
    return {
        "id": skill.id,
        "name": skill.name,
        "kind": skill.kind,
        "family": skill.family,
        "transform": skill.transform["id"],
        "tag": skill.transform.get("tag", ""),
        "intent": skill.intent,
        "where": f"{skill.location.get('function')} ({skill.location.get('construct')})",
        "conditions": [{"predicate": c["predicate"], "status": c["status"]} for c in skill.conditions],
        "effect": measured or "unmeasured",
        "card": f"skill://{skill.id}",
    }


def _program(program: str | None, source: str | None) -> Program:
    """What an agent hands in, as a path or as text: untrusted (written by an agent), judged by the static policy
    before anything of it runs; what the tools rewrite from it stays untrusted."""
    if source:
        with tempfile.TemporaryDirectory(prefix="klineage-mcp-") as tmp:
            path = Path(tmp) / "program.py"
            path.write_text(source)
            loaded = load_program(path)  # the same validation as a file: parses, defines ModelNew
            return Program("source", loaded.source, {}, None).written_by("agent")
    if program:
        return load_program(program).written_by("agent")
    raise UserError("give the program as `program` (a path) or `source` (its text)")


def _diff(before: Program, after: Program) -> str:
    start = dict(before.module_sources())
    out = []
    for module, text in after.module_sources():
        out.extend(
            difflib.unified_diff(
                start.get(module, "").splitlines(True), text.splitlines(True), f"a/{module}.py", f"b/{module}.py"
            )
        )
    return "".join(out)


class Tools:
    """The MCP tools as plain methods. One warm sandbox is shared by the gate runs (serialized by a lock)."""

    def __init__(self, library: Path, settings: Settings | None = None):
        self.library = Path(library)
        self.settings = settings or Settings.from_env()
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()

    def _skills(self) -> list[Skill]:
        if not (self.library / "skills").is_dir():
            return []
        with Library(self.library) as lib:  # a connection per call: tools run in worker threads
            return lib.list()

    def skill(self, skill_id: str) -> Skill:
        if not (self.library / "skills").is_dir():
            raise UserError(f"no skill library at {self.library}")
        with Library(self.library) as lib:
            return lib.get(skill_id)

    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(warm=self.settings.warm)
            atexit.register(self._sandbox.close)
        return self._sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    # --- tools -------------------------------------------------------------------------------------------------

    def search_skills(
        self,
        query: str = "",
        family: int | None = None,
        condition: str | None = None,
        kind: str | None = None,
        transform: str | None = None,
        limit: int = 20,
    ) -> dict:
        words = [w for w in re.split(r"\s+", query.lower()) if w]
        found = []
        for skill in self._skills():
            if family is not None and skill.family != family or kind and skill.kind != kind:
                continue
            if transform and skill.transform["id"] != transform:
                continue
            if condition and condition not in {c["predicate"] for c in skill.conditions}:
                continue
            text = " ".join([skill.id, skill.name, skill.intent, skill.transform["id"], str(skill.location)]).lower()
            if all(w in text for w in words):
                found.append(_summary(skill))
        note = "" if (self.library / "skills").is_dir() else f"no skill library at {self.library}"
        return {"library": str(self.library), "count": len(found), "skills": found[:limit], "note": note}

    def suggest_skills(
        self, workload: str, program: str | None = None, source: str | None = None, device: str = "cpu"
    ) -> dict:
        wl, prog, dev = load_workload(workload), _program(program, source), resolve_device(device)
        skills = self._skills()
        proposer = SkillProposer(wl, self.settings, dev, skills, catalog=False)  # skills to suggest, not the catalog
        candidates = proposer.propose(prog)
        offered = {c.origin for c in candidates} | {r.origin for r in proposer.refusals}
        unmatched = [s.id for s in proposer.skills if s.id not in offered]
        return {
            "workload": wl.name,
            "domain": wl.domain,
            "candidates": [{k: v for k, v in c.as_dict().items() if k != "program_hash"} for c in candidates],
            "refused": [asdict(r) for r in proposer.refusals],
            "no_site": unmatched,
            "note": "candidates are ordered by the skills' measured effect; a guard means the condition holds on "
            "part of the domain and the change is dispatched at launch. `no_site`: no place in this program "
            "matches the skill's construct mechanically (an agent or `--materializer llm` may still apply "
            "it by hand; the gates decide).",
        }

    def apply_skill(
        self,
        skill_id: str,
        workload: str,
        program: str | None = None,
        source: str | None = None,
        choice: int = 0,
        gate: bool = False,
        device: str = "cpu",
    ) -> dict:
        skill = self.skill(skill_id)
        wl, prog, dev = load_workload(workload), _program(program, source), resolve_device(device)
        proposer = SkillProposer(wl, self.settings, dev, [skill], catalog=False)
        candidates = [c for c in proposer.propose(prog) if c.origin == skill.id and c.program is not None]
        refused = [asdict(r) for r in proposer.refusals]
        if not candidates:
            why = "refused: its conditions do not hold here" if refused else "no site in this program matches it"
            return {"applied": False, "skill": skill.id, "reason": why, "refused": refused}
        chosen = candidates[max(0, min(choice, len(candidates) - 1))]
        out = {
            "applied": True,
            "skill": skill.id,
            "label": chosen.label,
            "guard": chosen.guard,
            "decided_by": list(chosen.decided_by),
            "choices": [c.label for c in candidates],
            "source": chosen.program.source,
            "modules": chosen.program.modules,
            "diff": _diff(prog, chosen.program),
            "refused": refused,
        }
        if gate:
            out["check"] = self._check(wl, chosen.program, ("compile", "correctness"), dev)
        return out

    def check_program(
        self,
        workload: str,
        program: str | None = None,
        source: str | None = None,
        gates: str = "compile,correctness,profile",
        device: str = "auto",
    ) -> dict:
        wanted = tuple(g.strip() for g in gates.split(",") if g.strip())
        if unknown := [g for g in wanted if g not in GATES]:
            raise UserError(f"unknown gate {unknown[0]!r}; known: {', '.join(GATES)}")
        wl, prog, dev = load_workload(workload), _program(program, source), resolve_device(device)
        return self._check(wl, prog, wanted, dev)

    def _check(self, wl, prog: Program, gates: tuple[str, ...], device: str) -> dict:
        with self._lock:
            report = check(wl, prog, self.settings, device, gates, self.sandbox())
        return report.as_dict()


def build_server(library: Path, settings: Settings | None = None):
    """The MCP server (official SDK), tools and skill resources registered; `.run("stdio")` serves it."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
        from mcp.server.mcpserver.resources import FunctionResource
    except ImportError:
        raise UserError("klineage mcp needs the MCP Python SDK (mcp>=2): pip install 'klineage[agents]'") from None
    from klineage.config import __version__

    tools = Tools(library, settings)
    server = MCPServer("klineage", instructions=INSTRUCTIONS, version=__version__)

    def told(method):
        """A user's mistake (a missing file, an unknown skill) reaches the agent as the tool's error message."""

        @functools.wraps(method)
        def tool(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except UserError as e:
                raise ToolError(str(e)) from None

        return tool

    for name, description in DESCRIPTIONS.items():
        server.add_tool(told(getattr(tools, name)), description=description)

    def reader(skill_id: str):
        def read() -> str:
            try:
                return card(tools.skill(skill_id))
            except UserError as e:  # removed from the library since the server started
                raise ResourceNotFoundError(str(e)) from None

        return read

    for skill in tools._skills():
        server.add_resource(
            FunctionResource.from_function(
                reader(skill.id),
                uri=f"skill://{skill.id}",
                name=skill.id,
                title=skill.name,
                description=skill.intent[:300],
                mime_type="text/markdown",
            )
        )
    return server, tools


def serve(library: Path) -> None:
    server, tools = build_server(library)
    try:
        server.run("stdio")
    finally:
        tools.close()


__all__ = ["Tools", "build_server", "serve"]
