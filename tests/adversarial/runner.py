"""How the tests run an adversarial case: the issue-30 attacks as untrusted programs, each hole still open on main
as a strict, named xfail (manifest.OPEN_HOLES), a case that tampers with the warm server in a sandbox of its own."""

from __future__ import annotations

import contextlib

import pytest

from klineage.check import CheckReport, check
from klineage.program import Program, load_program
from klineage.sandbox import Sandbox
from klineage.workload import load_workload
from tests.adversarial.manifest import OPEN_HOLES, OPEN_HOLES_GPU, ROOT, AdversarialCase


def untrusted(program: Program) -> Program:
    """The program as a model's or an agent's, which the static policy judges (on a tree without provenance, the
    program unchanged: nothing judges it statically there but the correctness gate's own scan)."""
    mark = getattr(program, "written_by", None)
    return mark("agent") if mark is not None else program


def run_case(case: AdversarialCase, settings, device: str, sandbox: Sandbox, trusted: bool = False) -> CheckReport:
    program = load_program(ROOT / case.program)
    if case.issue_class and not trusted:
        program = untrusted(program)
    own = Sandbox(warm=True) if case.own_sandbox else contextlib.nullcontext(sandbox)
    with own as box:
        return check(load_workload(ROOT / case.workload), program, settings, device, case.gates, box)


def first_failure(report: CheckReport):
    """The first verdict that is neither a pass nor a skip (the policy's, where it refused), else the last one."""
    return next((v for v in report.verdicts if v.status not in ("pass", "skip")), report.verdicts[-1])


def params(cases: list[AdversarialCase], device: str) -> list:
    """pytest params of `cases`, each hole still open on `device` a strict xfail naming what main did."""
    holes = OPEN_HOLES_GPU if device == "cuda" else OPEN_HOLES
    out = []
    for case in cases:
        name = case.program.removeprefix("programs/")
        hole = holes.get(case.program)
        # raises: a hole shows as a failed assertion; an attack that breaks the test itself is an error, not an xfail
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"open hole: {hole}")] if hole else []
        out.append(pytest.param(case, id=name, marks=marks))
    return out
