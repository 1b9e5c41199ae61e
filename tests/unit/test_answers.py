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
    checked({"parent": _timing(), "child": _timing(), "setup_s": 1.5, "settle_s": 40.0}, PAIR_ANSWER)
    for bad in (
        {"parent": _timing(), "child": _timing()},
        {"parent": _timing(), "child": _timing(), "setup_s": 1e400},
        {"parent": _timing(), "child": _timing(), "setup_s": 1.5, "settle_s": "long"},
    ):
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


def test_a_disagreement_the_gpus_own_account_explains_is_no_finding():
    """FlagGems's max_dim on a loaded H100: 0.0625 ms event-timed, 0.3746 ms a call back to back (RESULTS.md#wild-
    h100-2). Busy 17% of the judge's second loop, the device worked about 0.064 ms a call: the host was the slower."""
    first = {"per_call_ms": 0.3746, "calls": 98, "round_trip_ms": 0.1}
    assert clock_finding(0.0625, first) is not None  # the judge's clock alone refuses it
    host = {**first, "busy": {"per_call_ms": 0.375, "calls": 5333, "share": 0.17, "samples": 9, "device_ms": 0.0638}}
    assert clock_finding(0.0625, host) is None
    # a lying clock on a busy device: the device's own time a call is the judge's figure, and the finding says so
    account = {"per_call_ms": 0.2, "calls": 10000, "share": 0.98, "samples": 9, "device_ms": 0.196}
    found = clock_finding(0.001, {"per_call_ms": 0.2, "calls": 250, "round_trip_ms": 0.1, "busy": account})
    assert found is not None and "busy 98%" in found.detail
    # host padding does not hide a lie: 1 us claimed, the device busy 19% of a 1 ms call is 0.19 ms of work
    padded = {"per_call_ms": 1.0, "calls": 50, "busy": {"share": 0.19, "samples": 9, "device_ms": 0.19}}
    assert clock_finding(0.001, padded) is not None
    # no account (NVML absent): refused as before, and the finding says why
    unknown = {**first, "busy": {"share": None, "samples": 0, "device_ms": None, "why": "NVML unavailable: no lib"}}
    found = clock_finding(0.0625, unknown)
    assert found is not None and "not known (NVML unavailable" in found.detail


def test_the_busy_share_takes_only_samples_wholly_inside_the_window():
    from klineage.gpu_busy import share_within

    # one sample a second, 100% until 2.0 s, then 20%; the window (1.5, 4.5] s
    samples = [(int(t * 1e6), 100.0 if t <= 2.0 else 20.0) for t in (1.0, 2.0, 3.0, 4.0, 5.0)]
    busy = share_within(samples, int(1.5e6), int(4.5e6))
    # 2.0's sample covers (1.0, 2.0], partly before the window: dropped; 3.0 and 4.0 kept; 5.0 is after the end
    assert (busy.share, busy.samples) == (0.2, 2)
    none = share_within(samples, int(1.5e6), int(2.5e6))  # only 2.0 inside, and it reaches back: no account
    assert none.share is None and "no NVML utilization sample" in none.why


def test_busy_during_without_nvml_runs_the_loop_and_says_why(monkeypatch):
    from klineage import gpu_busy

    def missing(uuid):
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setattr(gpu_busy, "Nvml", missing)
    ran = []
    busy = gpu_busy.busy_during(lambda: ran.append(1), uuid="GPU-0")
    assert ran == [1] and busy.share is None and "NVML unavailable" in busy.why


class _Forger:
    """A candidate handle whose every answer is `meta`: what a program that took over its process could send."""

    def __init__(self, meta):
        self.meta = meta
        self.hello = {"isolation_line": "isolation: test"}

    def greet(self):
        return self.hello

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

    monkeypatch.setattr(candidate, "start", lambda spec, greet=True: _Forger(meta))
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


def test_the_busy_clock_multiplies_the_share_and_refuses_an_idle_account(monkeypatch):
    from klineage import gpu_busy
    from klineage.gates import profile

    monkeypatch.setattr(profile, "_loop", lambda candidate, calls: 0.0001 + calls * 0.0004)  # 0.4 ms a call
    clock = {"per_call_ms": 0.4, "calls": 125, "round_trip_ms": 0.1}

    def busy(share):
        return lambda run, uuid=None: (run(), gpu_busy.Busy(share, 5))[1]

    monkeypatch.setattr(gpu_busy, "busy_during", busy(0.15))
    account = profile.busy_clock(object(), clock)
    assert account["calls"] == 5000  # about BUSY_SPAN_S of calls
    assert abs(account["per_call_ms"] - 0.4) < 1e-9 and abs(account["device_ms"] - 0.06) < 1e-9
    monkeypatch.setattr(gpu_busy, "busy_during", busy(0.0))
    idle = profile.busy_clock(object(), clock)
    assert idle["device_ms"] is None and "idle" in idle["why"]
    assert profile.clock_finding(0.001, {**clock, "busy": idle}) is not None
