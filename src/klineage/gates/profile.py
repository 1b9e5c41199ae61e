"""The profile gate and the timing jobs beside it: the device's ceilings, one program against PyTorch eager, and a
parent program against a child (the measured effect of one step). GPU only; each runs inside a sandbox child."""

from __future__ import annotations

import time
from typing import Any

from klineage.compare import Finding
from klineage.config import device_name, versions
from klineage.gates.common import GateRequest, Verdict, build, input_sets, prepare, rotating
from klineage.program import Program


def ceilings_job(_: Any = None) -> dict:
    from klineage.timing import measure_ceilings

    return measure_ceilings()


def profile_job(request: GateRequest) -> Verdict:
    """Time the program on the workload's bench case against PyTorch eager, interleaved."""

    from klineage.timing import roofline, time_calls
    from klineage.workload import case_roofline, make_case_init_inputs

    started = time.perf_counter()
    workload, wl_module, program_module = prepare(request, interpret=False)
    case_name = workload.bench_case()
    case = workload.cases[case_name]
    init = make_case_init_inputs(wl_module, case)
    model = build(program_module.ModelNew, init).cuda()
    reference = build(wl_module.Model, init).cuda()
    settings = request.settings
    sets = input_sets(wl_module, case, settings.rotate_sets, cache_dir=settings.input_cache)

    last: list = []  # (input set, outputs) of the program's last timed call
    program_t, eager_t = time_calls(
        [keeping_last(model, sets, last), rotating(reference, sets)],
        settings.profile_warmup_ms,
        settings.profile_rep_ms,
        settings.profile_min_reps,
    )
    timed = timed_output_finding(workload, wl_module, reference, sets, last)
    if timed is not None:
        return Verdict(
            "profile",
            "fail",
            "timed_mismatch",
            f"the output of a timed call is wrong: {timed.detail}",
            evidence={"finding": timed.code, "case": case_name},
            seconds=time.perf_counter() - started,
        )
    metrics = {
        "case": case_name,
        "median_ms": program_t.median_ms,
        "spread": program_t.spread,
        "p20_ms": program_t.p20_ms,
        "p80_ms": program_t.p80_ms,
        "reps": program_t.reps,
        "wall_median_ms": program_t.wall_median_ms,
        "eager_median_ms": eager_t.median_ms,
        "speedup_vs_eager": eager_t.median_ms / program_t.median_ms,
    }
    dtype = case.get("dtype", "float32")
    work = case_roofline(wl_module, case)
    ceilings = request.ceilings or {}
    if work and ceilings:
        flops, nbytes = work
        seconds = program_t.median_ms * 1e-3
        metrics["achieved_tflops"] = flops / seconds / 1e12
        metrics["achieved_tbps"] = nbytes / seconds / 1e12
        floor = roofline(flops, nbytes, dtype, ceilings)
        metrics["roofline_fraction"] = floor["floor_ms"] / program_t.median_ms
        metrics["bound"] = floor["bound"]
    evidence = {"ceilings": ceilings, "eager": eager_t.as_dict(), "program": program_t.as_dict()}
    return Verdict("profile", "pass", metrics=metrics, evidence=evidence, seconds=time.perf_counter() - started)


def keeping_last(model, sets: list[list], last: list):
    """rotating(model, sets) that keeps a reference to its last call's outputs and input set (no copy inside the
    timed section: the reference is all it costs)."""
    import torch

    state = {"next": 0}

    def call():
        i = state["next"]
        state["next"] = (i + 1) % len(sets)
        with torch.no_grad():
            out = model(*sets[i])
        last[:] = [(i, out)]
        return out

    return call


def timed_output_finding(workload, wl_module, reference, sets: list[list], last: list):
    """The program's last timed call compared with the float64 reference on its input set, as the correctness gate
    compares: a program that takes another path when it is timed than when it is checked fails here. Skipped for
    workloads whose inputs the op changes in place (every timed call changed them again)."""
    import copy

    import torch

    from klineage.compare import compare_output, flatten_outputs

    if not last or workload.mutated_inputs or workload.clobbered_inputs:
        return None
    index, out = last[0]
    outputs = flatten_outputs(out)
    inputs = sets[index]
    with torch.no_grad():
        expected = flatten_outputs(reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        if getattr(wl_module, "NATIVE_REFERENCE", False):
            ref64 = [e.double() if isinstance(e, torch.Tensor) and e.is_floating_point() else e for e in expected]
        else:
            doubled = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            ref64 = flatten_outputs(copy.deepcopy(reference).double()(*doubled))
    if len(outputs) != len(expected):
        return Finding("shape_mismatch", f"{len(outputs)} outputs, expected {len(expected)}")
    for i, (o, r, e) in enumerate(zip(outputs, ref64, expected)):
        if isinstance(e, torch.Tensor):
            tol = workload.tolerance(str(e.dtype).removeprefix("torch."))
            finding = compare_output(o, r, e, tol, f"output {i}")
            if finding is not None:
                return finding
    return None


def profile_pair_job(payload: tuple[GateRequest, Program]) -> dict:
    """Time a parent program and a child program interleaved on the bench case (the same input sets for both):
    the measured effect of one step, with each side's spread."""

    from klineage.program import install
    from klineage.timing import time_calls
    from klineage.workload import make_case_init_inputs

    started = time.perf_counter()
    request, child = payload
    workload, wl_module, parent_module = prepare(request, interpret=False)
    child_module = install(child)
    case = workload.cases[workload.bench_case()]
    init = make_case_init_inputs(wl_module, case)
    parent_model = build(parent_module.ModelNew, init).cuda()
    child_model = build(child_module.ModelNew, init).cuda()
    sets = input_sets(wl_module, case, request.settings.rotate_sets, cache_dir=request.settings.input_cache)
    settings = request.settings
    calls = [rotating(parent_model, sets), rotating(child_model, sets)]
    setup_s = time.perf_counter() - started  # imports done: the programs installed, models built, inputs made
    parent_t, child_t = time_calls(
        calls, settings.profile_warmup_ms, settings.profile_rep_ms, settings.profile_min_reps
    )
    speedup = child_t.median_ms / parent_t.median_ms  # > 1: the parent (the optimized form) is faster
    noise = parent_t.spread + child_t.spread
    return {
        "measured": True,
        "case": workload.bench_case(),
        "parent_ms": parent_t.median_ms,
        "child_ms": child_t.median_ms,
        "parent_spread": parent_t.spread,
        "child_spread": child_t.spread,
        "speedup": speedup,
        "significant": abs(speedup - 1) > noise,
        "gpu_wait_s": parent_t.turn_wait_s,
        "gpu_held_s": parent_t.turn_held_s,
        "first_calls_s": parent_t.first_calls_s,
        "setup_s": setup_s,
        # what timed it: a walk made on the CPU and timed here keys its skills' effects by this GPU
        "device": device_name("cuda"),
        "versions": versions(),
    }
