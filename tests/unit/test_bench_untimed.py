"""A timed bench report names the candidates whose timing failed, so a method's result is not read as measured
where it was not (run 22: memory's autotune list on the fp32 batched matmul, out of device memory)."""

from klineage.bench import markdown, untimed_attempts


def _attempt(evaluation, outcome, effect):
    return {"evaluation": evaluation, "outcome": outcome, "kept": outcome == "kept", "effect": effect,
            "verdicts": [], "candidate": {"label": f"c{evaluation}"}}  # fmt: skip


def _result(attempts, timed=True):
    stamp = {"methods": ["memory"], "instances": ["bmm"], "device": "NVIDIA H200", "commit": "abc", "budget": 4,
             "date": "2026-12-02", "seconds": 1.0, "versions": {}, "timed": timed}  # fmt: skip
    summary = {"memory": {"geomean_speedup": 1.0, "geomean_expert_fraction": None, "geomean_vs_torch_compile": None,
                          "mean_roofline_fraction": None, "mean_evaluations_to_95": None, "mean_failed_share": 0.0,
                          "fast_1": 0.0, "escapes": 0}}  # fmt: skip
    return {"stamp": stamp, "summary": summary, "rows": [], "trajectories": {"bmm/memory": {"attempts": attempts}}}


def test_failed_timings_are_named_in_a_timed_report_and_measured_ones_are_not():
    oom = {"measured": False, "why": "timing failed: OutOfMemoryError: CUDA out of memory."}
    result = _result([_attempt(2, "not_faster", {"measured": True, "speedup": 0.9}),
                      _attempt(3, "not_timed", oom),
                      _attempt(4, "not_faster", oom),  # a report written before `not_timed` existed
                      _attempt(5, "failed_gate", {})])  # fmt: skip
    assert untimed_attempts(result) == [
        "bmm/memory evaluation 3: timing failed: OutOfMemoryError: CUDA out of memory.",
        "bmm/memory evaluation 4: timing failed: OutOfMemoryError: CUDA out of memory."]  # fmt: skip
    assert "Timings that failed (2;" in markdown(result)
    assert "Timings that failed" not in markdown(_result([_attempt(2, "not_faster", {"measured": True})]))
    assert "Timings that failed" not in markdown(_result([_attempt(3, "not_timed", oom)], timed=False))
