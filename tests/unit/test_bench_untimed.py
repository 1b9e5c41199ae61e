"""A timed bench report names the candidates whose timing failed, so a method's result is not read as measured
where it was not (run 22: memory's autotune list on the fp32 batched matmul, out of device memory)."""

import pytest

from klineage.bench.report import markdown, untimed_attempts


def _attempt(evaluation, outcome, effect):
    return {
        "evaluation": evaluation,
        "outcome": outcome,
        "kept": outcome == "kept",
        "effect": effect,
        "verdicts": [],
        "candidate": {"label": f"c{evaluation}"},
    }


def _result(attempts, timed=True):
    stamp = {
        "methods": ["memory"],
        "instances": ["bmm"],
        "device": "NVIDIA H200",
        "commit": "abc",
        "budget": 4,
        "date": "2026-12-02",
        "seconds": 1.0,
        "versions": {},
        "timed": timed,
    }
    summary = {
        "memory": {
            "geomean_speedup": 1.0,
            "geomean_expert_fraction": None,
            "geomean_vs_torch_compile": None,
            "mean_roofline_fraction": None,
            "mean_evaluations_to_95": None,
            "mean_failed_share": 0.0,
            "fast_1": 0.0,
            "escapes": 0,
        }
    }
    return {"stamp": stamp, "summary": summary, "rows": [], "trajectories": {"bmm/memory": {"attempts": attempts}}}


def test_failed_timings_are_named_in_a_timed_report_and_measured_ones_are_not():
    oom = {"measured": False, "why": "timing failed: OutOfMemoryError: CUDA out of memory."}
    result = _result(
        [
            _attempt(2, "not_faster", {"measured": True, "speedup": 0.9}),
            _attempt(3, "not_timed", oom),
            _attempt(4, "not_faster", oom),  # a report written before `not_timed` existed
            _attempt(5, "failed_gate", {}),
        ]
    )
    assert untimed_attempts(result) == [
        "bmm/memory evaluation 3: timing failed: OutOfMemoryError: CUDA out of memory.",
        "bmm/memory evaluation 4: timing failed: OutOfMemoryError: CUDA out of memory.",
    ]
    assert "Timings that failed (2;" in markdown(result)
    assert "Timings that failed" not in markdown(_result([_attempt(2, "not_faster", {"measured": True})]))
    assert "Timings that failed" not in markdown(_result([_attempt(3, "not_timed", oom)], timed=False))


def test_a_noisy_references_round_is_timed_again_and_the_steadier_round_kept():
    from klineage.bench.references import REFERENCE_SPREAD, _worst_program_spread, steadier
    from klineage.timing import Timing

    def timing(median, band):  # spread = band / (2 * median)
        return Timing(median, median - band / 2, median + band / 2, median - band, median + band, 30, median)

    # eager and torch.compile first: their noise is not ours and never asks for a second round
    calm = [timing(2.0, 1.0), timing(0.3, 0.2), timing(0.79, 0.01), timing(0.134, 0.004)]
    noisy = [timing(2.0, 0.0), timing(0.3, 0.0), timing(0.84, 0.06), timing(0.206, 0.069)]
    assert _worst_program_spread(calm) < REFERENCE_SPREAD < _worst_program_spread(noisy)
    assert steadier([noisy, calm]) is calm and steadier([calm, noisy]) is calm
    assert steadier([calm]) is calm


def test_the_report_names_references_timed_twice():
    result = _result([])
    result["references"] = {"rope": {"rounds": 2}, "softmax": {"rounds": 1}, "old": {}}
    text = markdown(result)
    assert "References timed twice (1; a program's spread in the first round was over 0.15" in text and "rope." in text


def test_the_report_names_instances_whose_eager_and_torch_compile_are_pytorchs_op():
    result = _result([])
    result["references"] = {"gems_softmax": {"eager_of": "pytorch op"}, "softmax": {"eager_of": "reference"}}
    line = "Eager and torch.compile are PyTorch's own op on the same inputs, not the start again (1): gems_softmax."
    assert line in markdown(result)
    result["references"] = {"softmax": {"eager_of": "reference"}, "old": {}}
    assert "PyTorch's own op" not in markdown(result)


def test_a_reference_that_does_not_compile_leaves_the_programs_timed(monkeypatch):
    """Inductor failing on a wild program (its own reference; FlagGems's kernels on the H100: NameError 'tle' is not
    defined) took every program's timing with it; now torch.compile's row carries the error, the programs their
    times, and a missing compiled time is no ratio."""
    import contextlib
    from types import SimpleNamespace

    import klineage.gates.candidate as candidate
    from klineage.bench.references import references_job
    from klineage.config import Settings
    from klineage.timing import Timing

    def answer(*medians, error=""):
        timings = [Timing(m, m, m, m, m, 30, m).as_dict() for m in medians]
        return SimpleNamespace(meta={"timings": timings, **({"torch_compile_error": error} if error else {})})

    answers = [answer(0.5, 0.2, 0.3, error="CompilationError: NameError('tle is not defined')")]
    monkeypatch.setattr(candidate, "spec_for", lambda *a, **k: None)
    monkeypatch.setattr(candidate, "running", lambda spec: contextlib.nullcontext())
    monkeypatch.setattr(candidate, "task", lambda *a, **k: answers.pop(0))
    request = SimpleNamespace(settings=Settings(), workload_path="w.py")
    timed = references_job((request, ["start", "final"]))
    assert timed["torch_compile"] == {"error": "CompilationError: NameError('tle is not defined')"}
    assert [timed[k]["ms"] for k in ("eager", "program0", "program1")] == [0.5, 0.2, 0.3]
    answers.append(answer(0.5, 0.4, 0.2, 0.3))  # compiled: four timings, as before
    timed = references_job((request, ["start", "final"]))
    assert [timed[k]["ms"] for k in ("eager", "torch_compile", "program0", "program1")] == [0.5, 0.4, 0.2, 0.3]
    answers.append(answer(0.5, 0.2, 0.3))  # three timings and no error: an answer that does not add up
    with pytest.raises(ValueError, match="3 timings answered, 4 asked"):
        references_job((request, ["start", "final"]))
