"""The profile gate and the timing jobs beside it: the device's ceilings, one program against PyTorch eager, and a
parent program against a child (the measured effect of one step). GPU only.

Each job runs in a sandbox child, the judge, which never imports a program: a candidate process (gates.candidate),
forked first thing, imports the program(s) and the workload, makes its own input sets and times (`profile_task`,
`pair_task`); the judge checks the answer's shape (gates.answers) and builds the result. What the candidate's clock
says is checked twice by the judge: the last timed call's outputs come back and are compared with the reference on
the same input set, made again here (`timed_mismatch`), and the judge times the program's forward back to back with
its own clock (`forward_loop_task`, `judge_clock`): a timed figure far below that, and below the device's busy
time a call as NVML tells it (`busy_clock`), is a clock the program changed (`clock_disagrees`)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from klineage.compare import Finding
from klineage.config import device_name, versions
from klineage.gates.answers import (
    COUNT,
    NUMBER,
    TIMING,
    VALUE,
    AnswerError,
    ListOf,
    Record,
    checked,
    text,
    timing,
)
from klineage.gates.autotune import AUTOTUNED, SettledTuners
from klineage.gates.candidate import CandidateGone, judged, running, spec_for, task
from klineage.gates.common import GateRequest, Verdict, build, input_set, input_sets, prepare_workload, rotating
from klineage.program import Program
from klineage.timing import LAUNCH_FIGURES


def ceilings_job(_: Any = None) -> dict:
    from klineage.timing import measure_ceilings

    return measure_ceilings()


# what the candidate answers to `profile`: its timings, and (unless the op changes its inputs) the input set and the
# outputs of the program's last timed call
PROFILE_ANSWER = Record(
    required={"program": TIMING, "eager": TIMING},
    optional={"last": COUNT, "outputs": ListOf(VALUE, 256), "autotuned": AUTOTUNED},
)
# `autotuned`: the config each side's autotuners ran (gates.autotune.SettledTuners); `pinned`: the child's kernels
# that took the parent's choice; `given`: the parent's kernels that ran the choices the judge gave (`parent_choices`)
PAIR_ANSWER = Record(
    required={"parent": TIMING, "child": TIMING, "setup_s": NUMBER},
    optional={
        "parent_autotuned": AUTOTUNED,
        "child_autotuned": AUTOTUNED,
        "pinned": ListOf(text(200), 64),
        "given": ListOf(text(200), 64),
        "settle_s": NUMBER,
    },
)
# a timed call's outputs may be as large as the bench case's inputs; the frame's body is capped at this
TIMED_OUTPUT_BYTES = 2**34


def _timing_meta(request: GateRequest) -> dict:
    s = request.settings
    return {
        "workload": request.workload_path,
        "sets": s.rotate_sets,
        "warmup_ms": s.profile_warmup_ms,
        "rep_ms": s.profile_rep_ms,
        "min_reps": s.profile_min_reps,
        "input_cache": str(s.inputs_dir) if s.inputs_dir is not None else None,
    }


def _timing_spec(request: GateRequest, others: tuple[Program, ...] = ()):
    # compiled programs, and their autotuners free to pick by time: what is timed is what a user runs
    return spec_for(request, interpret=False, autotune_picks=False, others=others)


def profile_job(request: GateRequest) -> Verdict:
    """Time the program on the workload's bench case against PyTorch eager, interleaved, in the candidate; judge the
    last timed call's outputs and the candidate's clock here."""
    from klineage.gates.confined import fork_reference

    started = time.perf_counter()
    verdict = judged(
        "profile",
        _timing_spec(request),
        lambda candidate, forked: _profile(request, candidate, forked),
        alongside=lambda: fork_reference(request),
    )
    return replace(verdict, seconds=time.perf_counter() - started)


def _profile(request: GateRequest, candidate, forked) -> Verdict:
    """The profile, once a self-reference workload's reference process said hello: it is forked beside the
    candidate, before CUDA is up in the judge (a process forked after could not use CUDA), and the timed-output
    check needs it (gates.confined); judged ends both."""
    from klineage.gates.confined import REFERENCE_ERROR, ReferenceUnavailable, reference_ready

    try:
        reference = reference_ready(forked)
    except ReferenceUnavailable as e:
        return Verdict("profile", "fail", REFERENCE_ERROR, str(e))
    return _profiled(request, candidate, reference)


def _profiled(request: GateRequest, candidate, reference) -> Verdict:
    from klineage.gates.confined import REFERENCE_ERROR
    from klineage.timing import roofline
    from klineage.workload import case_roofline

    workload, wl_module = prepare_workload(request, interpret=False)
    case_name = workload.bench_case()
    case = workload.cases[case_name]
    settings = request.settings
    # every timed call changed the inputs of an op that writes them: no input set to compare against
    keep = not (workload.mutated_inputs or workload.clobbered_inputs)
    meta = {**_timing_meta(request), "case": case_name, "keep_last": keep}
    frame = task(candidate, "profile", body_limit=TIMED_OUTPUT_BYTES if keep else 0, **meta)
    answer = checked(frame.meta, PROFILE_ANSWER)
    program_t, eager_t = timing(answer["program"]), timing(answer["eager"])
    if keep:
        index = answer.get("last")
        if index is None or index >= settings.rotate_sets or "outputs" not in answer:
            raise AnswerError(f"no last timed call on one of the {settings.rotate_sets} input sets: {index!r}")
        outputs = values_back(frame, answer["outputs"], "cuda")
        timed = _timed_check(request, workload, wl_module, (case_name, index), outputs, reference)
        if timed is not None and timed.code == REFERENCE_ERROR:  # the reference's failure, not the program's
            return Verdict("profile", "fail", timed.code, timed.detail, evidence={"case": case_name})
        if timed is not None:
            return Verdict(
                "profile",
                "fail",
                "timed_mismatch",
                f"the output of a timed call is wrong: {timed.detail}",
                evidence={"finding": timed.code, "case": case_name},
            )
    clock = judge_clock(candidate)
    if clock_finding(program_t.median_ms, clock) is not None:  # the host's path or a lying clock: ask the GPU
        clock = {**clock, "busy": busy_clock(candidate, clock)}
    disagrees = clock_finding(program_t.median_ms, clock)
    if disagrees is not None:
        evidence = {"judge_clock": clock, "program": program_t.as_dict(), "case": case_name}
        return Verdict("profile", "fail", disagrees.code, disagrees.detail, evidence=evidence)
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
        "judge_per_call_ms": clock["per_call_ms"],
    }
    if "busy" in clock:  # passed on the GPU's own account: the judge's figure was the host's
        metrics["device_busy_share"] = clock["busy"]["share"]
    if answer.get("autotuned"):
        metrics["autotuned"] = answer["autotuned"]  # the config its autotuners picked in this process
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
    evidence = {
        "ceilings": ceilings,
        "eager": eager_t.as_dict(),
        "program": program_t.as_dict(),
        "judge_clock": clock,
    }
    return Verdict("profile", "pass", metrics=metrics, evidence=evidence)


def values_back(frame, described: list, device: str) -> list:
    """Outputs the candidate sent, built from the frame's bytes on `device`; one that is not a tensor stands in as
    an object of the type the candidate named (it fails the comparison as not_a_tensor)."""
    from klineage.wire import WireError, tensor

    out = []
    for item in described:
        if "tensor" in item:
            try:
                out.append(tensor(frame, item["tensor"], device=device))
            except WireError as e:
                raise AnswerError(str(e)) from None
        else:
            out.append(type(str(item.get("type", "object"))[:64], (), {})())
    return out


# --- the judge's clock --------------------------------------------------------------------------------------------

# The judge's per-call figure: the program's forward run back to back in the candidate on the rotating input sets,
# timed by this process's clock from the request to the answer (the candidate synchronizes before it answers), less
# a round trip with no call. It is an upper bound on the device time of a call (it adds the host's launch path where
# that is the slower, and the flush is not in it, so L2 may be warm), never a figure the candidate can lower but by
# not running the calls. The candidate's median is event-timed with the L2 flush queued just before each call,
# which hides up to one flush (about 0.13 ms on the H200) of the host's launch path: for a program whose host path
# per call is H and device time G, the event figure is at least max(G, H - flush) and the judge's about max(H, G).
# With CLOCK_RATIO a quarter, an honest program would be refused where G < H/4 and H < 4/3 of a flush while H >=
# CLOCK_FLOOR_MS: a single Triton launch's host path is tens of microseconds, under the floor, but a library's wrapper
# is not (FlagGems's max_dim, RESULTS.md#wild-h100-2), so a disagreement is put to the GPU's own account of the
# loop before it is a finding (busy_clock). patch_elapsed_time reports 1 us a call on scale_add's bench case, whose
# 768 MiB of traffic take about 0.19 ms on the H200 (4.07 TB/s): 0.005 of the judge's figure.
CLOCK_FLOOR_MS = 0.05
CLOCK_RATIO = 0.25
CLOCK_SPAN_S = 0.05  # about how long the judge's timed loop runs: long against its clock and the pipe's jitter
CLOCK_CALLS = (8, 1000)  # the fewest and the most calls of that loop


def judge_clock(candidate) -> dict:
    """The judge's per-call figure (see above), measured with the GPU alone: the judge trades its own turn for it,
    so no other job's kernels land in the loop."""
    from klineage.sandbox import exclusive_turn

    with exclusive_turn():
        trip = min(_loop(candidate, 0) for _ in range(3))
        per = max(_loop(candidate, CLOCK_CALLS[0]) - trip, 1e-6) / CLOCK_CALLS[0]
        calls = max(CLOCK_CALLS[0], min(CLOCK_CALLS[1], int(CLOCK_SPAN_S / per)))
        wall = min(_loop(candidate, calls) for _ in range(2))
    return {"per_call_ms": max(wall - trip, 0.0) / calls * 1e3, "calls": calls, "round_trip_ms": trip * 1e3}


def _loop(candidate, calls: int) -> float:
    begin = time.perf_counter()
    checked(task(candidate, "forward_loop", calls=calls).meta, Record(required={"calls": COUNT}))
    return time.perf_counter() - begin


# Where the judge's figure is the host's, the GPU's own utilization (NVML, read by the judge: gpu_busy) over a second
# loop says how much of it the device worked: busy share times the loop's per-call figure is the device's time per
# call, which host work around the kernels cannot lower (nor raise). The loop lasts BUSY_SPAN_S: NVML's utilization
# period is 1/6 s to 1 s by product, and one whole period must fall inside it.
BUSY_SPAN_S = 2.0
BUSY_CALLS_MAX = 100_000


def busy_clock(candidate, clock: dict) -> dict:
    """The judge's loop again, for about BUSY_SPAN_S with the GPU alone, and how busy NVML says the GPU was: the
    loop's per-call figure, the busy share and their product, the device's time per call (None where NVML gave no
    share)."""
    from klineage.gpu_busy import Busy, busy_during
    from klineage.sandbox import exclusive_turn

    per_s = max(clock["per_call_ms"], 1e-3) / 1e3
    calls = max(CLOCK_CALLS[0], min(BUSY_CALLS_MAX, int(BUSY_SPAN_S / per_s)))
    walls: list[float] = []
    with exclusive_turn():
        busy = busy_during(lambda: walls.append(_loop(candidate, calls)))
    per_call_ms = max(walls[0] - clock["round_trip_ms"] / 1e3, 0.0) / calls * 1e3
    if busy.share == 0.0:  # idle through thousands of launches: a counter that does not count here, not an account
        busy = Busy(None, busy.samples, "NVML reported the GPU idle through the loop's launches")
    device_ms = busy.share * per_call_ms if busy.share is not None else None
    return {"per_call_ms": per_call_ms, "calls": calls, "device_ms": device_ms, **busy.as_dict()}


def clock_finding(reported_ms: float, clock: dict) -> Finding | None:
    """`clock_disagrees` where the candidate's median is below CLOCK_RATIO of the judge's per-call figure and that
    figure is long enough to be the device's (CLOCK_FLOOR_MS), unless the GPU's own account (`busy`, busy_clock)
    says the device worked no more than about the candidate's figure a call: the judge's figure was the host's."""
    judged_ms = clock["per_call_ms"]
    if judged_ms < CLOCK_FLOOR_MS or reported_ms >= CLOCK_RATIO * judged_ms:
        return None
    busy = clock.get("busy")
    device_ms = busy.get("device_ms") if busy else None
    if device_ms is not None and reported_ms >= CLOCK_RATIO * device_ms:
        return None
    if busy is None:
        account = ""
    elif device_ms is None:
        account = f"; the GPU's busy share is not known ({busy.get('why', '')})"
    else:
        account = f"; the GPU was busy {busy['share']:.0%} of a second loop, {device_ms:.4f} ms a call (NVML)"
    return Finding(
        "clock_disagrees",
        f"the candidate timed {reported_ms:.4f} ms a call; the judge's clock, {judged_ms:.4f} ms a call over "
        f"{clock['calls']} calls back to back{account}: a clock in the candidate's process does not tell the time",
    )


# --- the candidate's side -----------------------------------------------------------------------------------------


def profile_task(served, frame) -> tuple[dict, dict]:
    """In the candidate: the program and PyTorch eager timed interleaved on the bench case (as the profile job did
    in one process), the last timed call's input set and outputs kept for the judge, the model and sets kept for the
    judge's loop."""
    from klineage.timing import time_calls
    from klineage.workload import make_case_init_inputs

    meta = frame.meta
    workload, wl_module = served.workload(meta["workload"])
    case = workload.cases[meta["case"]]
    init = make_case_init_inputs(wl_module, case)
    model = build(served.module.ModelNew, init).cuda()
    reference = build(wl_module.Model, init).cuda()
    sets = input_sets(wl_module, case, int(meta["sets"]), cache_dir=_task_cache(meta), write_cache=False)
    last: list = []  # (input set, outputs) of the program's last timed call
    tuners = SettledTuners()
    with tuners.side("program"):
        program_t, eager_t = time_calls(
            [keeping_last(model, sets, last), rotating(reference, sets)],
            float(meta["warmup_ms"]),
            float(meta["rep_ms"]),
            int(meta["min_reps"]),
        )
    served.timed = {"model": model, "sets": sets}
    answer: dict = {"program": program_t.as_dict(), "eager": eager_t.as_dict()}
    if autotuned := tuners.chosen("program"):
        answer["autotuned"] = autotuned
    tensors: dict = {}
    if meta.get("keep_last") and last:
        from klineage.compare import flatten_outputs
        from klineage.wire import pack_values

        index, out = last[0]
        tensors, described = pack_values([_plain(o) for o in flatten_outputs(out)], "t")
        answer.update(last=index, outputs=described)
    return tensors, answer


def forward_loop_task(served, frame) -> tuple[dict, dict]:
    """In the candidate: the timed model's forward `calls` times back to back on the rotating sets, then a
    device-wide synchronization, for the judge's clock."""
    import torch

    calls = int(frame.meta["calls"])
    if calls:
        call = rotating(served.timed["model"], served.timed["sets"])
        for _ in range(calls):
            call()
    torch.cuda.synchronize()
    return {}, {"calls": calls}


def _plain(out):
    """An output's values as a plain tensor (a subclass's, too: the judge compares values)."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().as_subclass(torch.Tensor) if type(out) is not torch.Tensor else out.detach()
    return out


def _task_cache(meta: dict):
    from pathlib import Path

    return Path(meta["input_cache"]) if meta.get("input_cache") else None


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


def _timed_check(request: GateRequest, workload, wl_module, timed: tuple[str, int], outputs: list, process):
    """timed_output_finding of the last timed call (its case and input set), against the workload's Model built
    here, or, for a self-reference workload, against its original program in the reference process (`process`,
    gates.confined): third-party code never runs in the judge."""
    from klineage.gates.confined import confined_model
    from klineage.workload import make_case_init_inputs

    case_name, index = timed
    case = workload.cases[case_name]
    init = make_case_init_inputs(wl_module, case)
    inputs = input_set(wl_module, case, index, cache_dir=request.settings.inputs_dir)  # the same generator, seed
    try:
        if process is None:
            reference = build(wl_module.Model, init).cuda()
        else:
            reference = confined_model(process, case_name, init, "cuda")
        return timed_output_finding(workload, wl_module, reference, {index: inputs}, [(index, outputs)])
    except CandidateGone as e:  # only the reference process answers here (the candidate's turn is over)
        return Finding(e.code, e.detail)


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


def profile_pair_job(payload: tuple) -> dict:
    """Time a parent program and a child program interleaved on the bench case (the same input sets for both):
    the measured effect of one step, with each side's spread. Both run in one candidate process; the judge builds
    the result from its timings. A candidate that ended or answered out of shape raises (the job's error).
    The payload: (request, child) or (request, child, parent_choices); `parent_choices`: what the parent's
    autotuners chose when it was timed before (AUTOTUNED), run again instead of tuned (gates.autotune.SettledTuners)."""
    started = time.perf_counter()
    request, child, *rest = payload
    parent_choices = rest[0] if rest else None
    with running(_timing_spec(request, others=(child,))) as candidate:
        start_s = time.perf_counter() - started  # the candidate process started, its program imported
        workload, _ = prepare_workload(request, interpret=False)
        meta = {**_timing_meta(request), **({"parent_choices": parent_choices} if parent_choices else {})}
        answer = checked(task(candidate, "pair", **meta).meta, PAIR_ANSWER)
    parent_t, child_t = timing(answer["parent"]), timing(answer["child"])
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
        # each side's host time to queue a call, and the share of repetitions the GPU still waited for it after
        # the flush and the wait in front (timing._time_calls): what a loaded host could still put in a timing
        **{f"parent_{k}": getattr(parent_t, k) for k in LAUNCH_FIGURES},
        **{f"child_{k}": getattr(child_t, k) for k in LAUNCH_FIGURES},
        # where the rest of the job went: the candidate's start, the models and inputs made, each side's first
        # call (its kernels compiled, its autotuners settled): on the H100 a matmul's timing job took 50-70 s while
        # it held the GPU 0.3-0.6 s, and nothing said where the rest went (RESULTS.md#wild-13)
        "start_s": start_s,
        "setup_s": answer["setup_s"],
        **({"settle_s": answer["settle_s"]} if "settle_s" in answer else {}),
        # the config each side's autotuners ran, and the child's kernels pinned to the parent's choice
        **{k: answer[k] for k in ("parent_autotuned", "child_autotuned", "pinned", "given") if answer.get(k)},
        "job_s": time.perf_counter() - started,
        # what timed it: a walk made on the CPU and timed here keys its skills' effects by this GPU
        "device": device_name("cuda"),
        "versions": versions(),
    }


def pair_task(served, frame) -> tuple[dict, dict]:
    """In the candidate: the parent (the candidate's program) and the child (its first other program) timed
    interleaved on the bench case, the same input sets for both."""
    from klineage.program import install
    from klineage.timing import autotuners_alone, time_calls
    from klineage.workload import make_case_init_inputs

    started = time.perf_counter()
    meta = frame.meta
    workload, wl_module = served.workload(meta["workload"])
    child_module = install(served.spec.others[0])
    case = workload.cases[workload.bench_case()]
    init = make_case_init_inputs(wl_module, case)
    parent_model = build(served.module.ModelNew, init).cuda()
    child_model = build(child_module.ModelNew, init).cuda()
    sets = input_sets(wl_module, case, int(meta["sets"]), cache_dir=_task_cache(meta), write_cache=False)
    calls = [rotating(parent_model, sets), rotating(child_model, sets)]
    setup_s = time.perf_counter() - started  # the child installed, models built, inputs made
    # the autotuners settled alike on both sides before anything is timed (SettledTuners says the rule and why):
    # the parent runs the choices it was timed with before (or tunes), the child's interchangeable autotuners take
    # the parent's; time_calls' own first calls then find every choice made
    tuners = SettledTuners()
    settled = time.perf_counter()
    with autotuners_alone():
        with tuners.side("parent", choices=meta.get("parent_choices")):
            calls[0]()
        with tuners.side("child", pin_to="parent"):
            calls[1]()
    settle_s = time.perf_counter() - settled  # both sides' first calls: their kernels compiled, autotuners settled
    parent_t, child_t = time_calls(calls, float(meta["warmup_ms"]), float(meta["rep_ms"]), int(meta["min_reps"]))
    answer = {"parent": parent_t.as_dict(), "child": child_t.as_dict(), "setup_s": setup_s, "settle_s": settle_s}
    for side in ("parent", "child"):
        if autotuned := tuners.chosen(side):
            answer[f"{side}_autotuned"] = autotuned
    if tuners.pinned:
        answer["pinned"] = tuners.pinned[:64]
    if tuners.given:
        answer["given"] = tuners.given[:64]
    return {}, answer
