"""What a bench run measures besides the methods: the references timed side by side with the final programs
(PyTorch eager, `torch.compile`, the expert, the start) and the correctness escapes of each final program (failures on
hidden seeds and in-domain probe cases that the start does not have). Eager and `torch.compile` are the workload's
`Model`, or, for an instance with a PyTorch-op workload (a wild kernel's `pytorch.py`), PyTorch's own op on the same
inputs: a wild workload's `Model` is its start program again."""

from __future__ import annotations

import types
from dataclasses import dataclass
from pathlib import Path

from klineage.conditions import size_in_domain
from klineage.config import Settings, clip
from klineage.gates import GateRequest, Verdict, run_gate
from klineage.gates.answers import TIMING as TIMING_SHAPE
from klineage.probe import make_probes
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.workload import Workload

HIDDEN_SEED_BASE = 7_919_000  # never used by the correctness gate during a run
HIDDEN_SEEDS = 6
# Probe predicates re-checked on every final program, when the workload's domain allows the violation.
ESCAPE_PROBES = ("divisible_by_block", "contiguous", "dtype_fp32", "dtype_fp16", "dtype_bf16")


def references_job(payload: ReferencesPayload | tuple) -> dict:
    """Time PyTorch eager and torch.compile of the reference (or of PyTorch's op: the payload's `pytorch_op`)
    side by side, and the given programs side by side in a round of their own (`references_task` says why), on the
    bench case. The programs run in a candidate process (gates.candidate:
    `references_task`), never in this one, the judge; a round whose noisiest program spreads over the payload's
    spread limit (REFERENCE_SPREAD) is timed once more, as the judge decides. The payload: a ReferencesPayload, or
    the tuple (request, programs[, spread limit]). The result names which Model eager and torch.compile ran
    (`eager_of`: EAGER_OF_REFERENCE or EAGER_OF_PYTORCH); with the payload's `programs_only`, the programs alone."""
    from klineage.gates.answers import ListOf, Record, checked, text, timing
    from klineage.gates.candidate import running, spec_for, task

    payload = ReferencesPayload.of(payload)
    programs = payload.programs
    meta = references_meta(payload)
    shape = Record(
        required={"timings": ListOf(TIMING_SHAPE, 2 + len(programs))},
        optional={"torch_compile_error": text(400), "eager_error": text(400)},
    )
    spec = spec_for(payload.request, interpret=False, autotune_picks=False, others=tuple(programs))
    rounds, compile_error, eager_error = [], None, None
    with running(spec) as candidate:
        for _ in range(2):  # a second round only where the first spread too wide
            answer = checked(task(candidate, "references", **meta).meta, shape)
            compile_error = answer.get("torch_compile_error") or None
            eager_error = answer.get("eager_error") or None
            references = 0 if payload.programs_only or eager_error else 1 if compile_error else 2
            timings = [timing(t) for t in answer["timings"]]
            if len(timings) != references + len(programs):
                raise ValueError(f"{len(timings)} timings answered, {references + len(programs)} asked")
            rounds.append(timings)
            if _worst_program_spread(timings, references) <= payload.spread_limit:
                break
    timings = steadier(rounds, references)
    names = ["eager", "torch_compile"][:references] + [f"program{i}" for i in range(len(programs))]
    timed = {n: {"ms": t.median_ms, "spread": t.spread} for n, t in zip(names, timings, strict=True)}
    if payload.programs_only:
        return {**timed, "rounds": len(rounds)}
    if eager_error:  # PyTorch's op failed on this device: neither reference has a time, the programs have theirs
        timed["eager"] = timed["torch_compile"] = {"error": eager_error}
    elif compile_error:  # torch.compile's failure is its own row's: the programs are timed all the same
        timed["torch_compile"] = {"error": compile_error}
    eager_of = EAGER_OF_PYTORCH if "pytorch_op" in meta else EAGER_OF_REFERENCE
    return {**timed, "rounds": len(rounds), "eager_of": eager_of}


def references_meta(payload: ReferencesPayload) -> dict:
    """The references task's request: the bench case's workload and timing settings, and the PyTorch-op workload's
    text where the payload names one. Its text, not its path: it lies in the data directory, which the candidate
    cannot read (gates.candidate.hidden_paths)."""
    s = payload.request.settings
    meta = {
        "workload": payload.request.workload_path,
        "sets": s.rotate_sets,
        "warmup_ms": s.profile_warmup_ms,
        "rep_ms": s.profile_rep_ms,
        "min_reps": s.profile_min_reps,
        "input_cache": str(s.inputs_dir) if s.inputs_dir is not None else None,
    }
    if payload.programs_only:
        meta["programs_only"] = True
    elif payload.pytorch_op:
        meta["pytorch_op"] = Path(payload.pytorch_op).read_text()
    return meta


def pytorch_op_module(source: str) -> types.ModuleType:
    """A PyTorch-op workload's text run as a fresh module (in the candidate, which cannot read its file): its `Model`
    is PyTorch's own op, its `get_inputs` and sizes those of the start's inputs file. With no file behind it, its
    sizes are never rebound (shrink.size_plan reads the file): as written, the bench size."""
    module = types.ModuleType("klineage_pytorch_op")
    exec(compile(source, "<pytorch op workload>", "exec"), module.__dict__)
    return module


def references_task(served, frame) -> tuple[dict, dict]:
    """In the candidate: each program built once (the first request) and timed side by side in a round of its own,
    then eager and torch.compile (of the workload's Model, or of PyTorch's op where the request carries its workload's
    text: `pytorch_op`), built once after the programs' first round, timed side by side in theirs (`programs_only`:
    the programs alone). Every call runs on the start workload's input sets. The answer's timings: the references',
    then the programs'.

    Why apart: a references round disturbed the programs timed in it. On the H100 (2026-12-06) gems_sort's start and
    blind's final ran x1.015 apart alone, twice, and x1.003 and x1.000 apart interleaved with a just-compiled
    torch.compile of `torch.sort` (whose own spread was 0.05-0.07, the programs' 0.003-0.006 against 0.0003 alone);
    x1.014 once Inductor's cache was warm. The bench's row read x1.000 for a change confirmed at x1.014 and re-timed
    at x1.015 (RESULTS.md#wild-h100-4). The programs' round comes first, before Inductor compiles anything here."""
    from klineage.gates.common import build, input_sets, rotating
    from klineage.program import install
    from klineage.timing import time_calls
    from klineage.workload import make_case_init_inputs

    meta = frame.meta
    timing = (float(meta["warmup_ms"]), float(meta["rep_ms"]), int(meta["min_reps"]))
    if "programs" not in served.timed:
        workload, wl_module = served.workload(meta["workload"])
        case = workload.cases[workload.bench_case()]
        init = make_case_init_inputs(wl_module, case)
        cache = Path(meta["input_cache"]) if meta.get("input_cache") else None
        sets = input_sets(wl_module, case, int(meta["sets"]), cache_dir=cache, write_cache=False)
        served.timed["programs"] = [
            rotating(build(install(program).ModelNew, init).cuda(), sets) for program in served.spec.others
        ]
        served.timed["setup"] = (wl_module, case, init, sets)
    programs = time_calls(served.timed["programs"], *timing)
    references = []
    if not meta.get("programs_only"):
        if "references" not in served.timed:
            served.timed["references"] = _reference_calls(served, meta, *served.timed["setup"])
        references = time_calls(served.timed["references"], *timing)
    failed = {k: served.timed[k] for k in ("torch_compile_error", "eager_error") if served.timed.get(k)}
    timings = [t.as_dict() for t in references + programs]
    return {}, {"timings": timings, **failed}


def _reference_calls(served, meta: dict, wl_module, case: dict, init: list, sets: list) -> list:
    """Eager and torch.compile (where Inductor compiles it) of the workload's Model, or of PyTorch's op where the
    request carries its text, as calls rotating through the start's input sets; torch.compile's failure is kept in
    `served.timed`, and so is eager's: then there is no reference call at all.

    Eager runs once here first. PyTorch's op may not run on this device where it ran on the CPU that checked it
    (a matmul of int32 tensors: "addmm_cuda" not implemented for 'Int'; bitsandbytes's ops without their native
    library): its error in the timing round took the programs' times with it, and five wild-quant instances'
    methods, timed all the way, had no speedup in the report (H100, docs/runs/2026-12-06-h100-wild6)."""
    import torch

    from klineage.gates.common import build, rotating
    from klineage.timing import compile_as_host_work
    from klineage.workload import make_case_init_inputs

    reference = pytorch_op_module(meta["pytorch_op"]) if meta.get("pytorch_op") else wl_module
    reference_init = init if reference is wl_module else make_case_init_inputs(reference, case)
    try:
        eager = build(reference.Model, reference_init).cuda()
        with torch.no_grad():
            eager(*sets[0])
        torch.cuda.synchronize()
    except Exception as e:  # PyTorch's op on this device, not ours: the programs are timed all the same
        served.timed["eager_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return []
    calls = [rotating(eager, sets)]
    try:
        compiled = torch.compile(build(reference.Model, reference_init).cuda())
        # compile now, as host work: only Inductor's autotuning and the measurement take the GPU alone
        with compile_as_host_work(), torch.no_grad():
            compiled(*sets[0])
            torch.cuda.synchronize()
        calls.append(rotating(compiled, sets))
    except Exception as e:  # Inductor's own failure on a program it cannot compile
        # a wild program as its own reference: Inductor compiling FlagGems's kernels failed on the H100
        # (NameError: 'tle' is not defined) and took every program's timing with it (RESULTS.md#wild); a
        # self-reference workload without a PyTorch-op workload still compiles its program
        torch._dynamo.reset()
        served.timed["torch_compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return calls


# A references round whose noisiest program (start, expert or a final; not eager or torch.compile, whose own spread
# says nothing of ours) spreads wider than this, half its p20-p80 band over its median, is timed once more. On the
# H200 with 12 shards, the rotary embedding's final took 0.206 ms at a spread of 0.17, against 0.134 ms side by side
# with its start in the run and 0.133 ms a run earlier, and its row read x4.07 where the earlier one read x5.99
# (RESULTS.md#run-24). It was the one job of that run's 32 over 0.15 (the next, 0.074); a run earlier one was too,
# Liger's RMSNorm at 0.50 (RESULTS.md#run-23): a second round costs a job or two a run.
REFERENCE_SPREAD = 0.15

# what references_job timed as eager and torch.compile (its result's `eager_of`): the workload's Model, or PyTorch's
# own op on the same inputs (ReferencesPayload.pytorch_op)
EAGER_OF_REFERENCE, EAGER_OF_PYTORCH = "reference", "pytorch op"


@dataclass(frozen=True)
class ReferencesPayload:
    """What references_job times: `request` (the workload, the start, the settings), `programs` side by side, the
    spread over which a round is timed again, and `pytorch_op`: the path of a workload whose Model is PyTorch's own
    op on the same inputs (a wild instance's `origin["pytorch"]`), timed as eager and torch.compile in place of the
    workload's Model. A wild workload's Model is its start program: eager timed the start again, and torch.compile
    spent 50-106 s a job tracing FlagGems to compare a program with a compiled copy of itself (H100:
    docs/runs/2026-12-05-h100-wild2). `programs_only`: no eager, no torch.compile, the programs alone (the re-time
    in a fresh process reads no reference's time, and its cold process compiled them all again for nothing)."""

    request: GateRequest
    programs: tuple[Program, ...]
    spread_limit: float = REFERENCE_SPREAD
    pytorch_op: str | None = None
    programs_only: bool = False

    @classmethod
    def of(cls, payload: ReferencesPayload | tuple) -> ReferencesPayload:
        """A payload as given: this record, or the tuple (request, programs[, spread limit]) callers passed before."""
        if isinstance(payload, ReferencesPayload):
            return payload
        request, programs, *rest = payload
        return cls(request, tuple(programs), *rest[:1])


def _worst_program_spread(timings: list, references: int = 2) -> float:
    return max((t.spread for t in timings[references:]), default=0.0)


def steadier(rounds: list[list], references: int = 2) -> list:
    """Of rounds timing the same calls (eager, torch.compile where it compiled: `references`, then the programs,
    side by side in their own round: references_task), the one whose noisiest program spreads least: each round's
    programs stay timed together, never mixed across rounds."""
    return min(rounds, key=lambda timings: _worst_program_spread(timings, references))


@dataclass(frozen=True)
class Recheck:
    """What re-checking a final program found: `escapes`, failures the start does not have, and `unchecked`, checks
    that could not run (a job raised twice instead of judging, so no verdict says whether the final escaped)."""

    escapes: list[dict]
    unchecked: list[dict]


def escapes(
    workload: Workload, start: Program, final: Program, settings: Settings, device: str, sandbox: Sandbox
) -> Recheck:
    """Failures of `final` on hidden seeds and in-domain probe cases that `start` does not have. A check whose job
    raised instead of judging (status `error`, not `fail`) runs once more; a second error makes it `unchecked`,
    never an escape: a bench on the H200 counted a FileNotFoundError of the harness as an escape of blind and memory
    (RESULTS.md#run-23)."""
    if final.hash == start.hash:
        return Recheck([], [])
    hidden = settings.replace(seed_base=HIDDEN_SEED_BASE, seeds=HIDDEN_SEEDS, use_cache=False)
    checks: list[tuple[str, dict | None]] = [("hidden seeds", None)]
    for predicate in ESCAPE_PROBES:
        probes, _ = make_probes(predicate, workload, device)
        for probe in probes:
            if _in_domain(probe, workload):
                checks.append((f"{predicate}: {probe['name']}", probe))
    found, unchecked = [], []
    for label, probe in checks:
        final_v = _judged(workload, final, hidden, device, sandbox, probe)
        if final_v.passed:
            continue
        start_v = None if final_v.status == "error" else _judged(workload, start, hidden, device, sandbox, probe)
        broken = final_v if start_v is None else start_v if start_v.status == "error" else None
        if broken is not None:
            unchecked.append({"check": label, "code": broken.code, "reason": clip(broken.reason, 2000)})
        elif start_v.passed:
            found.append({"check": label, "code": final_v.code, "reason": clip(final_v.reason, 2000)})
    return Recheck(found, unchecked)


def _judged(workload, program, settings, device, sandbox, probe) -> Verdict:
    """The correctness verdict; a job that raised instead of judging (status `error`) runs once more."""
    verdict = _correct(workload, program, settings, device, sandbox, probe)
    return _correct(workload, program, settings, device, sandbox, probe) if verdict.status == "error" else verdict


def _correct(workload, program, settings, device, sandbox, probe) -> Verdict:
    request = GateRequest(str(workload.path), program, device, settings, settings.target, probe=probe)
    return run_gate("correctness", request, sandbox)


def _in_domain(probe: dict, workload: Workload) -> bool:
    """A probe counts for escapes only when the workload promises to handle it."""
    layouts = workload.domain.get("layout") or workload.domain.get("layouts") or ["contiguous"]
    if probe.get("layout") and probe["layout"] not in layouts:
        return False
    dtypes = workload.domain.get("dtype") or workload.domain.get("dtypes")
    if dtypes and probe["case"].get("dtype") not in dtypes and "dtype" in probe["case"]:
        return False
    # sizes as conditions.py reads a domain: a [low, high] range or a list of allowed values. A re-check of the
    # rotary embedding at D = 33 (its domain lists 16..256 powers of two) could not run: the reference itself raised
    # (RESULTS.md#run-24).
    return all(size_in_domain(workload.domain, key, value) for key, value in probe["case"].items())
