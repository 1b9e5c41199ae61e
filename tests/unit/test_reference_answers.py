"""A self-reference's answers within one correctness check (gates.correctness._reference_for): the autotune passes
run each named case at seed 0 again, once per further config, on the same inputs, and the reference process runs
its first config every time, so it is asked once per named case; every other trial asks it afresh."""

import types

import torch

from klineage.gates.correctness import Trial, _reference_for, _TrialState


def _counting_reference():
    calls = []

    def reference(x):
        calls.append(x.clone())
        return [x * 2]

    return reference, calls


def test_a_self_reference_answers_a_named_case_once_across_the_autotune_passes():
    reference, calls = _counting_reference()
    state = _TrialState("cpu", candidate=None, reference=object())  # a reference process stands behind it
    module = types.SimpleNamespace()
    x = torch.arange(4.0)
    trials = [Trial("tiny", 0, "normal"), Trial("tiny", 0, "normal", 1), Trial("tiny", 0, "normal", 2)]
    answers = [_reference_for(t, module, reference, None, [x], state) for t in trials]
    assert len(calls) == 1
    assert all(torch.equal(a[0][0], x * 2) for a in answers)
    _reference_for(Trial("wide", 0, "normal", 1), module, reference, None, [x], state)
    _reference_for(Trial("tiny", 0, "uniform"), module, reference, None, [x], state)
    assert len(calls) == 3  # another case, another distribution: asked


def test_seeded_trials_and_an_in_process_reference_are_asked_every_time():
    reference, calls = _counting_reference()
    state = _TrialState("cpu", candidate=None, reference=object())
    module = types.SimpleNamespace()
    for _ in range(2):  # fresh seeds make fresh inputs: never from an earlier answer
        _reference_for(Trial("tiny", 1000, "normal"), module, reference, None, [torch.ones(3)], state)
    assert len(calls) == 2
    in_process = _TrialState("cpu", candidate=None)  # the workload's own Model, built in the judge: cheap to ask
    for config in range(3):
        _reference_for(Trial("tiny", 0, "normal", config), module, reference, None, [torch.ones(3)], in_process)
    assert len(calls) == 5
