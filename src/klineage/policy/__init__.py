"""The static policy for candidate source: what a program written by a model or handed in by an agent may say,
judged in the judge's caller before anything of the candidate runs (`check.py`).

A program is its main source ("program") and its override modules (dotted names). Every module is parsed and
indexed, because a judged module's names resolve into the others (`from fastkern.ops import f` is one of the
program's own modules); only the modules named in `judged` can be refused. What an untrusted module may say:

- imports: only the allowed trees (torch, triton, math) outside their denied subtrees, a few named helpers of
  other modules (typing, functools, operator, dataclasses, `from __future__ import annotations`), the program's
  own modules, and public names defined in the source of an installed kernel package (`policy.imports`,
  `policy.names`);
- names and attributes: no builtin outside SAFE_BUILTINS (no eval, exec, compile, __import__, getattr by
  computed name, vars, globals, locals, open, type), no dunder outside a small safe set, no private attribute of
  an object the program did not make, no frame/code/traceback attribute, no module used as a value, no
  monkeypatching of imported or the program's own objects, no metaclass or Tensor subclass (`policy.rules`);
- where code runs: no host transfer or scalar read of tensor data in forward and what it calls, only kernel code
  in a Triton kernel, no compute in launch callbacks (`policy.flow`).

A finding is a value (`Finding`); `judge` never raises: a module that does not parse is a finding itself."""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from klineage.policy.flow import Module, flow_findings
from klineage.policy.imports import Own, bindings
from klineage.policy.names import installed_source
from klineage.policy.rules import Finding, Rules, with_parents
from klineage.program import Program

POLICY_VERSION = 1  # bump when a rule changes what it refuses


def judge(sources: list[tuple[str, str]], judged: set[str]) -> list[Finding]:
    """The policy's findings over the modules named in `judged`, from (module, source) pairs: "program" is the main
    file, every other name an override module's dotted name. Sorted by module and line. Never raises: source the
    analysis itself fails on (a bug of the policy, or source shaped to crash it) is a `policy_error` finding of
    every judged module, so it refuses what it could not read, and only informs on trusted code."""
    try:
        return _judge(sources, judged)
    except (RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
        why = f"the policy could not analyse the program: {type(e).__name__}: {e}"[:300]
        return [Finding("policy_error", name, 0, why) for name, _ in sources if name in judged]


def _judge(sources: list[tuple[str, str]], judged: set[str]) -> list[Finding]:
    own = Own({name: source for name, source in sources if name != "program"})
    modules: list[Module] = []
    findings: list[Finding] = []
    for name, source in sources:
        try:
            tree = with_parents(ast.parse(source))
        except SyntaxError as e:
            if name in judged:
                findings.append(Finding("syntax", name, e.lineno or 0, f"does not parse: {e.msg}"))
            continue
        bound, refused = bindings(tree, own)
        modules.append(Module(name, tree, bound, name in judged))
        if name in judged:
            findings.extend(Finding(rule, name, line, detail) for line, rule, detail in refused)
            findings.extend(Finding(rule, name, line, detail) for line, rule, detail in Rules(tree, bound, own).run())
    findings.extend(Finding(rule, m.name, line, detail) for m, line, rule, detail in flow_findings(modules))
    unique = {(f.module, f.line, f.rule, f.detail): f for f in findings}
    return sorted(unique.values(), key=lambda f: (f.module != "program", f.module, f.line, f.rule))


@dataclass(frozen=True)
class PolicyReport:
    """The policy over one program: `judged` the modules it could refuse (the untrusted ones, less an installed
    module handed in unmodified), `findings` what it found there; with `informed`, it also looked at the trusted
    modules and what it found there is `information`, never a refusal."""

    trusted: bool
    author: str
    judged: tuple[str, ...]
    findings: tuple[Finding, ...] = ()
    information: tuple[Finding, ...] = ()
    informed: bool = False

    @property
    def refused(self) -> bool:
        return bool(self.findings)

    def summary(self) -> str:
        """One line for `klineage check`'s output."""
        if self.trusted:
            told = f"{_count(self.information)}, information only" if self.informed else "not judged"
            return f"policy: trusted ({told})"
        # the static rules' verdict alone, apart from the gates' above it ("program judged: passed" under a
        # correctness failure read as the program's verdict)
        said = f"refused, {_count(self.findings)}" if self.refused else "no finding"
        return f"policy: untrusted ({self.author}); static rules over {', '.join(self.judged) or 'nothing'}: {said}"

    def as_dict(self) -> dict:
        return {
            "version": POLICY_VERSION,
            "trusted": self.trusted,
            "author": self.author,
            "judged": list(self.judged),
            "refused": self.refused,
            "findings": [f.as_dict() for f in self.findings],
            "information": [f.as_dict() for f in self.information],
        }


def _count(findings: tuple[Finding, ...]) -> str:
    return f"{len(findings)} finding{'' if len(findings) == 1 else 's'}"


def unmodified_installed(module: str, source: str) -> bool:
    """An override module whose source is the installed module's, byte for byte: trusted by provenance whoever
    handed it in (a program directory that carries Liger's file as it is installed)."""
    return module != "program" and installed_source(module) == source


def judge_program(program: Program, inform: bool = False) -> PolicyReport:
    """The policy over `program`'s untrusted modules (over the lines its author changed, where the module had a
    trusted text before: `Program.base`); with `inform`, its findings over the trusted ones too, as
    information. A trusted program without `inform` is not parsed at all (mining and optimizing a trusted program
    pay nothing)."""
    sources = program.module_sources()
    judged = {m for m, s in sources if m in program.untrusted and not unmodified_installed(m, s)}
    if not judged and not inform:
        return PolicyReport(program.trusted, program.author, ())
    found = judge(sources, {m for m, _ in sources} if inform else judged)
    written = {m: changed_lines(program.base[m], s) for m, s in sources if m in judged and m in program.base}
    refused = tuple(f for f in found if f.module in judged and (f.module not in written or f.line in written[f.module]))
    return PolicyReport(
        program.trusted,
        program.author,
        tuple(sorted(judged)),
        refused,
        tuple(f for f in found if f not in refused),
        inform,
    )


def changed_lines(before: str, after: str) -> set[int]:
    """Lines of `after` (1-based) that are not in `before`'s text as difflib matches them, and line 0 (a finding
    of the whole module, one that does not parse)."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    kept = {b + i for a, b, n in matcher.get_matching_blocks() for i in range(n)}
    return {0} | {i + 1 for i in range(len(after.splitlines())) if i not in kept}


__all__ = ["POLICY_VERSION", "Finding", "PolicyReport", "judge", "judge_program", "unmodified_installed"]
