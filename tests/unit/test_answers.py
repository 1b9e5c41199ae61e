"""The judge reads a candidate's task answers (compile, profile, timed pair) through shapes: a forged or malformed
answer is refused with AnswerError (a `protocol_error` verdict), before any of it is used."""

import math

import pytest

from klineage.gates import answers
from klineage.gates.answers import AnswerError, checked, timing
from klineage.gates.compile import GPU_ANSWER, TARGET_ANSWER, _numbers
from klineage.gates.profile import PAIR_ANSWER, PROFILE_ANSWER, clock_finding


def _timing(**changes) -> dict:
    t = {
        "median_ms": 0.2,
        "p20_ms": 0.19,
        "p80_ms": 0.21,
        "min_ms": 0.18,
        "max_ms": 0.3,
        "reps": 100,
        "wall_median_ms": 0.25,
        "turn_wait_s": 0.0,
        "turn_held_s": 0.5,
        "first_calls_s": 0.1,
        "spread": 0.05,
    }
    return {**t, **changes}


def test_an_honest_profile_answer_is_read():
    answer = checked(
        {"program": _timing(), "eager": _timing(), "last": 3, "outputs": [{"tensor": "t0"}]}, PROFILE_ANSWER
    )
    t = timing(answer["program"])
    assert t.median_ms == 0.2 and t.reps == 100 and math.isclose(t.spread, 0.05)


@pytest.mark.parametrize(
    "program",
    [
        _timing(median_ms=float("nan")),
        _timing(median_ms=float("inf")),
        _timing(median_ms="0.2"),
        _timing(reps=True),  # a bool is no count
        _timing(reps=-1),
        _timing(reps=2.5),
        {k: v for k, v in _timing().items() if k != "median_ms"},
        {**_timing(), "verdict": "pass"},  # a key not asked for
        [0.2],
        None,
    ],
)
def test_a_malformed_timing_is_refused(program):
    with pytest.raises(AnswerError):
        timing(checked({"program": program, "eager": _timing()}, PROFILE_ANSWER)["program"])


@pytest.mark.parametrize(
    "program",
    [
        _timing(median_ms=0.0, p20_ms=0.0, min_ms=0.0),  # a median of zero
        _timing(median_ms=0.5),  # above its own p80: no distribution anyone measured
        _timing(min_ms=-1.0),
        _timing(reps=0),
    ],
)
def test_a_timing_out_of_order_is_refused(program):
    with pytest.raises(AnswerError):
        timing(program)


@pytest.mark.parametrize(
    "meta",
    [
        {"program": _timing(), "eager": _timing(), "last": -1},
        {"program": _timing(), "eager": _timing(), "last": 1, "outputs": "t0"},
        {"program": _timing(), "eager": _timing(), "outputs": [{"tensor": 5}]},
        {"program": _timing(), "eager": _timing(), "outputs": [{"tensor": "t0", "exec": "print(1)"}]},
        {"program": _timing()},
        {"program": _timing(), "eager": _timing(), "status": "pass"},
    ],
)
def test_a_forged_profile_answer_is_refused(meta):
    with pytest.raises(AnswerError):
        checked(meta, PROFILE_ANSWER)


def test_a_pair_answer_needs_both_timings_and_a_finite_setup():
    checked({"parent": _timing(), "child": _timing(), "setup_s": 1.5}, PAIR_ANSWER)
    for bad in ({"parent": _timing(), "child": _timing()}, {"parent": _timing(), "child": _timing(), "setup_s": 1e400}):
        with pytest.raises(AnswerError):
            checked(bad, PAIR_ANSWER)


SPEC = {
    "name": "k",
    "registers": 32,
    "shared_bytes": 0,
    "specialization": "[1024] warps=4 stages=3",
    "global_load_widths": {"128": 2},
    "error": False,
}


def test_a_compile_answer_is_read_and_a_forged_one_refused():
    good = {"compiled": [SPEC], "errors": [], "forward_errors": []}
    assert checked(good, TARGET_ANSWER)["compiled"] == [SPEC]
    forged = [
        {"compiled": [SPEC], "errors": []},  # no forward_errors
        {"compiled": [{**SPEC, "registers": [1]}], "errors": [], "forward_errors": []},
        {"compiled": [{**SPEC, "global_load_widths": {"128": "two"}}], "errors": [], "forward_errors": []},
        {"compiled": SPEC, "errors": [], "forward_errors": []},
        {"compiled": [SPEC], "errors": [1], "forward_errors": []},
        {"compiled": [SPEC], "errors": [], "forward_errors": [], "passed": True},
    ]
    for meta in forged:
        with pytest.raises(AnswerError):
            checked(meta, TARGET_ANSWER)


def test_a_metric_the_verdict_adds_up_must_be_a_number():
    with pytest.raises(AnswerError):
        _numbers([{**SPEC, "registers": "255"}])
    with pytest.raises(AnswerError):
        _numbers([{**SPEC, "shared_bytes": True}])
    assert _numbers([SPEC]) == [SPEC]


def test_a_gpu_compile_answer_names_kernels_or_a_failure():
    checked({"kernels": [SPEC], "target": "sm_90"}, GPU_ANSWER)
    checked({"failure": "case tiny: RuntimeError: boom"}, GPU_ANSWER)
    with pytest.raises(AnswerError):
        checked({"kernels": [SPEC], "target": "sm_90", "verdict": "pass"}, GPU_ANSWER)


def test_shapes_limit_sizes():
    with pytest.raises(AnswerError):
        checked("x" * 3000, answers.text(2000))
    with pytest.raises(AnswerError):
        checked(list(range(11)), answers.ListOf(answers.NUMBER, 10))
    with pytest.raises(AnswerError):
        checked({"k" * 300: 1}, answers.MapOf(answers.NUMBER))


def test_the_judges_clock_fails_a_timing_far_below_it_where_the_device_is_busy():
    clock = {"per_call_ms": 0.2, "calls": 250, "round_trip_ms": 0.1}
    found = clock_finding(0.001, clock)  # patch_elapsed_time's microsecond on scale_add's bench case
    assert found is not None and found.code == "clock_disagrees"
    assert clock_finding(0.19, clock) is None  # an honest event figure, the judge's a little higher
    assert clock_finding(0.06, clock) is None  # launches hidden behind the flush: within CLOCK_RATIO
    # below the floor the judge's figure is the host's launch path, not the device's: no claim either way
    assert clock_finding(0.001, {"per_call_ms": 0.03, "calls": 1000, "round_trip_ms": 0.1}) is None


class _Forger:
    """A candidate handle whose every answer is `meta`: what a program that took over its process could send."""

    def __init__(self, meta):
        self.meta = meta
        self.hello = {"isolation_line": "isolation: test"}

    def request(self, meta, tensors=None, body_limit=0):
        from klineage.wire import Frame

        return Frame({}, self.meta)

    def close(self):
        pass


@pytest.mark.parametrize(
    "meta",
    [
        {"compiled": [{**SPEC, "registers": "many"}], "errors": [], "forward_errors": []},
        {"verdict": {"gate": "compile", "status": "pass"}},
        {"compiled": [], "errors": [], "forward_errors": [], "metrics": {"specializations": 9}},
    ],
)
def test_a_forged_compile_answer_is_a_protocol_error_verdict(meta, monkeypatch, tmp_path):
    from klineage.config import Settings
    from klineage.gates import candidate, compile
    from klineage.gates.common import GateRequest
    from klineage.program import Program

    monkeypatch.setattr(candidate, "start", lambda spec: _Forger(meta))
    program = Program("forger", "x = 1\n")
    request = GateRequest(str(tmp_path / "workload.py"), program, "cpu", Settings(data_dir=tmp_path))
    verdict = compile.compile_job(request)
    assert (verdict.status, verdict.code) == ("fail", "protocol_error"), verdict
    assert verdict.evidence["isolation"] == "isolation: test"


def test_a_turn_request_that_is_not_one_is_a_protocol_error(tmp_path):
    import os

    from klineage.gates.candidate import Candidate, CandidateGone

    down_r, down_w = os.pipe()
    handle = Candidate(0, down_w, down_r, tmp_path)
    for meta in ({"turn": "forever", "enter": True}, {"turn": "exclusive", "enter": "yes"}):
        with pytest.raises(CandidateGone) as gone:
            handle._turn(meta, [])
        assert gone.value.code == "protocol_error"
    with pytest.raises(CandidateGone):  # leaving a turn it never entered
        handle._turn({"turn": "exclusive", "enter": False}, [])
    held: list = []
    handle._turn({"turn": "off", "enter": True}, held)  # no lock in use: granted, nothing taken
    handle._turn({"turn": "off", "enter": False}, held)
    assert held == []
    os.close(down_r)
    os.close(down_w)
