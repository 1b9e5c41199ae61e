"""Progress from the first second (issue 31): a long command says what it is doing at once, and a step that runs on
says so again with the time it has taken, so nothing runs silently for minutes."""

import time

from klineage.cli.common import progress_bar


def test_a_task_is_said_at_once_and_a_long_step_again_while_it_runs(monkeypatch, capsys):
    monkeypatch.setenv("KLINEAGE_PROGRESS_LINES", "1")
    with progress_bar(False) as progress:
        monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
        progress.add_task("checking the start program on cpu", total=None)
        time.sleep(2.5)
        progress.say("a line that stays")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(" checking the start program on cpu")
    assert any("checking the start program on cpu (still running, " in line for line in lines[1:])
    assert lines[-1].endswith(" a line that stays")


def test_quiet_says_nothing(monkeypatch, capsys):
    monkeypatch.delenv("KLINEAGE_PROGRESS_LINES", raising=False)
    with progress_bar(True) as progress:  # --json
        progress.add_task("mining", total=None)
        progress.say("case tiny, derived ...")
    assert capsys.readouterr().err == ""


def test_optimize_says_each_step_before_it_starts(monkeypatch, settings):
    """The start's check (per gate), each candidate's check and its timing are said as they begin: the first line
    of a self-reference run came after its 222 s start check (issue 31). Faked gates and timer: nothing runs."""
    import klineage.optimize as opt
    from klineage.check import CheckReport
    from klineage.gates import Verdict
    from klineage.optimize import optimize
    from klineage.program import load_program
    from klineage.sandbox import SandboxResult
    from klineage.workload import load_workload
    from tests.conftest import FIXTURES
    from tests.optimize.skillmaker import FixedProposer

    wl = load_workload(FIXTURES / "optimize" / "rowsum_workload.py")
    start = load_program(FIXTURES / "optimize" / "rowsum_naive.py")
    faster = start.__class__("v1", start.source + "\nVARIANT = 1\n")

    def fake_check(workload, program, settings, device="cpu", gates=(), sandbox=None, on_gate=None):
        for gate in gates or ("compile", "correctness", "profile"):
            if on_gate:
                on_gate(gate)
        verdicts = (Verdict("correctness", "pass"), Verdict("profile", "pass", metrics={"median_ms": 1.0}))
        return CheckReport(workload.name, program.name, program.hash, device, "fake", "fake", verdicts, (False,) * 2)

    def fake_pair(workload, current, candidate, settings, device, sandbox, parent_choices=None):
        timed = {"parent_ms": 1.0, "child_ms": 0.5, "parent_spread": 0.01, "child_spread": 0.01}
        return SandboxResult(True, value={"case": "bench", **timed})

    monkeypatch.setattr(opt, "check", fake_check)
    monkeypatch.setattr(opt, "time_pair", fake_pair)
    monkeypatch.setattr(opt, "device_name", lambda device: "fake GPU")
    said = []
    proposer = FixedProposer("one", [faster])
    optimize(wl, start, proposer, settings, "cuda", budget=2, sandbox=object(), on_phase=said.append)
    start_check = "checking the start program rowsum_naive on cuda (evaluation 1 of 2)"
    assert said[:4] == [start_check] + [f"{start_check}: {g} gate" for g in ("compile", "correctness", "profile")]
    assert "evaluation 2 of 2: checking variant 0" in said
    assert "evaluation 2 of 2: timing variant 0 against the current program" in said
    assert said[-1] == "timing the start against the result, side by side"
