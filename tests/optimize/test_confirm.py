"""A gain is kept only when a confirmation re-time agrees (optimize._confirmed, issue 31): on an autotuned
max-reduction one timed pair credited an alignment hint with x5.37 whose independent re-time read x1.00. Faked
gates and timer at the timed pair's boundary (check.time_pair's dict): nothing runs."""

import pytest

from klineage.bench.report import _rows_table
from klineage.bench.run import confirmations
from klineage.optimize import optimize, report
from tests.optimize.skillmaker import FixedProposer
from tests.optimize.test_optimize import _rowsum


def _fake(monkeypatch, rounds: list[float], spread: float = 0.02) -> list:
    """Gates that pass every program; timed pairs that put the candidate at the next of `rounds` (speedups of the
    candidate over the current program, one per timed pair in call order). Returns the pairs timed."""
    import klineage.optimize as opt
    from klineage.check import CheckReport
    from klineage.gates import Verdict
    from klineage.sandbox import SandboxResult

    timed: list = []

    def fake_check(workload, program, settings, device="cpu", gates=(), sandbox=None, on_gate=None):
        verdicts = (Verdict("correctness", "pass"), Verdict("profile", "pass", metrics={"median_ms": 1.0}))
        return CheckReport(workload.name, program.name, program.hash, device, "fake", "fake", verdicts, (False,) * 2)

    def fake_pair(workload, current, candidate, settings, device, sandbox, parent_choices=None):
        speedup = rounds[min(len(timed), len(rounds) - 1)]
        timed.append((current.name, candidate.name))
        value = {"parent_ms": 1.0, "child_ms": 1.0 / speedup, "parent_spread": spread, "child_spread": spread}
        return SandboxResult(True, value={"case": "bench", **value})

    monkeypatch.setattr(opt, "check", fake_check)
    monkeypatch.setattr(opt, "time_pair", fake_pair)
    monkeypatch.setattr(opt, "device_name", lambda device: "fake GPU")
    return timed


def _neutral():
    """A semantically neutral rewrite of the program (a constant nothing reads): the same kernel, whatever a timer
    says."""
    wl, start = _rowsum()
    return wl, start, start.__class__("neutral", start.source + "\nALIGNED = 16  # read by nothing\n")


def test_a_neutral_rewrite_timed_faster_once_is_not_kept_when_the_re_time_says_x1(monkeypatch, settings):
    """The first pair says x1.4 (the autotuner picked a worse config for the current program in that process); the
    confirmation in a fresh process says x1.0: not kept, and the report shows both numbers."""
    wl, start, neutral = _neutral()
    timed = _fake(monkeypatch, [1.4, 1.0])
    t = optimize(wl, start, FixedProposer("one", [neutral]), settings, "cuda", budget=2, sandbox=object())
    (a,) = t.attempts
    assert not a.kept and a.outcome == "not_confirmed" and t.best.hash == start.hash
    assert timed == [(start.name, "neutral")] * 2  # the first pair and its confirmation, each its own job
    c = a.effect["confirmation"]
    assert c["first_speedup"] == pytest.approx(1.4) and c["confirmed_speedup"] == pytest.approx(1.0)
    assert not c["kept"] and a.effect["speedup"] == pytest.approx(1.0)  # what reproduces, for what learns from it
    text = report(t)
    assert "- variant 0: not confirmed: x1.400 first, x1.000 on the re-time (not beyond its spread of 4.0%)" in text
    assert "## Kept\n\n- nothing" in text


def test_a_real_gain_that_both_rounds_agree_on_is_kept_with_both_numbers(monkeypatch, settings):
    wl, start, faster = _neutral()
    _fake(monkeypatch, [1.4, 1.35, 1.38])  # the candidate, its confirmation, then the start against the result
    t = optimize(wl, start, FixedProposer("one", [faster]), settings, "cuda", budget=2, sandbox=object())
    (a,) = t.attempts
    assert a.kept and a.outcome == "kept" and t.best.hash == faster.hash
    c = a.effect["confirmation"]
    assert (c["first_speedup"], c["confirmed_speedup"]) == (pytest.approx(1.4), pytest.approx(1.35))
    assert a.effect["speedup"] == pytest.approx(1.35)  # the smaller round
    assert "1. variant 0 (from `catalog`): x1.350 (confirmed: x1.400 first, x1.350 on the re-time)" in report(t)
    # the bench report's row says the same
    rows = confirmations(t)
    assert rows == [
        {
            "evaluation": 2,
            "candidate": "variant 0",
            "first_speedup": pytest.approx(1.4),
            "confirmed_speedup": pytest.approx(1.35),
            "kept": True,
            "why": "x1.400 first, x1.350 on the re-time",
        }
    ]


def test_the_bench_table_names_gains_the_re_time_refused(monkeypatch, settings):
    wl, start, neutral = _neutral()
    _fake(monkeypatch, [1.4, 1.0])
    t = optimize(wl, start, FixedProposer("one", [neutral]), settings, "cuda", budget=2, sandbox=object())
    row = {
        "instance": "rowsum",
        "method": "one",
        "speedup": 1.0,
        "expert_fraction": None,
        "roofline_fraction": None,
        "vs_torch_compile": None,
        "evaluations": 2,
        "evaluations_to_95": None,
        "kept": 0,
        "refusals": 0,
        "escapes": [],
        "stop": "budget spent",
        "confirmations": confirmations(t),
    }
    assert "| 0 (1 not confirmed: x1.40 then x1.00) |" in _rows_table([row])[-1]


def test_a_confirmation_that_could_not_time_refuses_the_gain(monkeypatch, settings):
    import klineage.optimize as opt
    from klineage.sandbox import SandboxResult

    wl, start, neutral = _neutral()
    _fake(monkeypatch, [1.4])
    first = opt.time_pair
    calls = []

    def failing_second(*args, **kwargs):
        calls.append(1)
        return first(*args, **kwargs) if len(calls) == 1 else SandboxResult(False, error="OutOfMemoryError: alone")

    monkeypatch.setattr(opt, "time_pair", failing_second)
    t = optimize(wl, start, FixedProposer("one", [neutral]), settings, "cuda", budget=2, sandbox=object())
    (a,) = t.attempts
    assert not a.kept and a.outcome == "not_confirmed"
    assert "the confirmation re-time failed (timing failed: OutOfMemoryError: alone)" in report(t)


def test_the_knob_turns_the_confirmation_off(monkeypatch, settings):
    wl, start, neutral = _neutral()
    timed = _fake(monkeypatch, [1.4, 1.0])
    off = settings.replace(confirm_gains=False)
    t = optimize(wl, start, FixedProposer("one", [neutral]), off, "cuda", budget=2, sandbox=object())
    (a,) = t.attempts
    assert a.kept and a.effect["confirmation"] == {"skipped": "turned off (KLINEAGE_CONFIRM=0)"}
    assert len(timed) == 2  # the candidate, then the start against the result: no re-time


def test_the_env_knob(monkeypatch):
    from klineage.config import Settings

    assert Settings.from_env().confirm_gains
    monkeypatch.setenv("KLINEAGE_CONFIRM", "0")
    assert not Settings.from_env().confirm_gains


def test_on_the_cpu_nothing_is_re_timed_and_the_evidence_says_so(monkeypatch, settings):
    wl, start, neutral = _neutral()
    timed = _fake(monkeypatch, [1.4])
    # explore: gated and kept without evidence of speed (a catalog candidate is otherwise not tried untimed)
    t = optimize(wl, start, FixedProposer("one", [neutral]), settings, "cpu", budget=2, sandbox=object(), explore=True)
    assert timed == [] and [a.outcome for a in t.attempts] == ["unmeasured"]
    for a in t.attempts:
        assert a.effect["confirmation"] == {"skipped": "no GPU: nothing was timed, so there is no gain to re-time"}


def _fake_choices(monkeypatch, profile_choice: dict | None, child_ms: float) -> list:
    """Gates that pass every program, the start's profile naming `profile_choice` (or none); timed pairs at
    `child_ms` against 1.0 whose answer says what each side's autotuners ran. Returns (current, candidate, the
    choices the pair was given) per pair, in call order."""
    import klineage.optimize as opt
    from klineage.check import CheckReport
    from klineage.gates import Verdict
    from klineage.sandbox import SandboxResult

    given: list = []

    def fake_check(workload, program, settings, device="cpu", gates=(), sandbox=None, on_gate=None):
        metrics = {"median_ms": 1.0, **({"autotuned": profile_choice} if profile_choice else {})}
        verdicts = (Verdict("correctness", "pass"), Verdict("profile", "pass", metrics=metrics))
        return CheckReport(workload.name, program.name, program.hash, device, "fake", "fake", verdicts, (False,) * 2)

    def fake_pair(workload, current, candidate, settings, device, sandbox, parent_choices=None):
        given.append((current.name, candidate.name, parent_choices))
        value = {"parent_ms": 1.0, "child_ms": child_ms, "parent_spread": 0.01, "child_spread": 0.01}
        value["parent_autotuned"] = {"k": {"(8,)": f"ran by {current.name}"}}
        value["child_autotuned"] = {"k": {"(8,)": f"ran by {candidate.name}"}}
        return SandboxResult(True, value={"case": "bench", **value})

    monkeypatch.setattr(opt, "check", fake_check)
    monkeypatch.setattr(opt, "time_pair", fake_pair)
    monkeypatch.setattr(opt, "device_name", lambda device: "fake GPU")
    return given


def test_a_pair_runs_the_current_programs_autotuner_choices_and_the_confirmation_tunes_again(monkeypatch, settings):
    """The first pair of each candidate is given what the current program's autotuners chose when it was timed
    (the start's profile; a kept candidate's own pair), so the current program does not tune again; the
    confirmation, in a fresh process, is given nothing: both sides tune."""
    wl, start, first = _neutral()
    second = first.__class__("second", first.source + "\nALSO = 1\n")
    start_choice = {"k": {"(8,)": "BLOCK: 128"}}
    given = _fake_choices(monkeypatch, start_choice, child_ms=0.5)
    t = optimize(wl, start, FixedProposer("one", [first, second]), settings, "cuda", budget=3, sandbox=object())
    assert [a.kept for a in t.attempts] == [True, True]
    assert t.attempts[0].effect["candidate_autotuned"] == {"k": {"(8,)": "ran by neutral"}}
    assert given[:4] == [
        (start.name, "neutral", start_choice),  # the start's profile
        (start.name, "neutral", None),  # the confirmation
        ("neutral", "second", {"k": {"(8,)": "ran by neutral"}}),  # the kept candidate's pair
        ("neutral", "second", None),
    ]
    assert given[4] == (start.name, "second", None)  # the start against the result: both tune


def test_without_a_profile_choice_the_first_pair_tells_the_next_one(monkeypatch, settings):
    """A start whose profile named no choice (a tuner it did not see): its first pair tunes, and the next
    candidate's pair from the same program runs what the current program ran there."""
    wl, start, first = _neutral()
    second = first.__class__("second", first.source + "\nALSO = 1\n")
    given = _fake_choices(monkeypatch, None, child_ms=1.0)
    t = optimize(wl, start, FixedProposer("one", [first, second]), settings, "cuda", budget=3, sandbox=object())
    assert [a.outcome for a in t.attempts] == ["not_faster", "not_faster"]
    assert [g[2] for g in given] == [None, {"k": {"(8,)": f"ran by {start.name}"}}]
