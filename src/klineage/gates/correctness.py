"""The correctness gate: every output compared with a float64 reference on the workload's cases and fresh seeds,
under run-time guards (poisoned buffers, input mutation, two runs agreeing, launch traces, no PyTorch compute in
forward), then the static findings. Runs inside a sandbox child; `plan_trials` is also the audit's plan."""

from __future__ import annotations

import copy
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from klineage.compare import Finding, bitwise_equal, compare_output, flatten_outputs, relative_error
from klineage.gates.autotune import AutotunePicks
from klineage.gates.common import GateRequest, Verdict, build, fail, memory_finding, prepare, sync, to_device
from klineage.sandbox import yield_turn


@dataclass(frozen=True)
class Trial:
    case: str
    seed: int
    distribution: str
    config: int = 0  # which of each autotuner's configs runs (AutotunePicks): 0, the first, unless a later pass

    def label(self) -> str:
        tuned = f", autotune config {self.config + 1}" if self.config else ""
        return f"case {self.case}, seed {self.seed}, {self.distribution} inputs{tuned}"


def plan_trials(workload, device: str, seeds: int, seed_base: int = 1000, seed_case: str = "") -> list[Trial]:
    """Named cases (seed 0, the workload's own inputs), then fresh seeds cycling through the distributions."""
    trials = [Trial(name, 0, "normal") for name in workload.check_cases(device)]
    seed_case = seed_case if seed_case in workload.cases else workload.seed_case(device)
    dists = workload.distributions
    for i in range(seeds):
        trials.append(Trial(seed_case, seed_base + i, dists[(i + 1) % len(dists)]))
    return trials


def correctness_job(request: GateRequest) -> Verdict:
    started = time.perf_counter()
    try:
        return _correctness(request, started)
    except ImportError as e:
        return Verdict(
            "correctness",
            "fail",
            "import_error",
            f"program failed to import: {e}",
            seconds=time.perf_counter() - started,
        )


def _correctness(request: GateRequest, started: float) -> Verdict:

    from klineage.guards import static_findings

    device = request.device
    program_dir = Path(tempfile.mkdtemp(prefix="klineage-program-"))  # where install() writes the program's files
    try:
        workload, wl_module, program_module = prepare(request, interpret=device == "cpu", workdir=program_dir)
    except Exception as e:
        return Verdict("correctness", "fail", "import_error", f"{type(e).__name__}: {e}")
    state = _TrialState(
        device,
        request.settings.guard_bytes,
        host_ops=frozenset(workload.host_ops),
        program_dir=str(program_dir.resolve()),
        input_cache=request.settings.input_cache,
    )
    trials = plan_trials(
        workload, device, request.settings.seeds, request.settings.seed_base, request.settings.seed_case
    )
    if request.probe is not None:  # a probe: one case that violates one condition
        workload, trials = _probe_plan(workload, request.probe, state)
    with AutotunePicks() as picks:
        finding, trials = _run_trials(
            workload, wl_module, program_module, trials, state, picks, probe=request.probe is not None
        )
    if finding is not None:
        trial, finding, index = finding
        tuned = {"autotune_configs": dict(picks.chosen)} if picks.chosen else {}
        if picks.unrunnable:
            tuned["autotune_unrunnable"] = picks.unrunnable
        return fail(
            "correctness",
            finding,
            metrics={"trials_passed": index, "trials": len(trials)},
            evidence={"trial": trial.label(), "kernels": sorted(state.kernels), **tuned},
            seconds=time.perf_counter() - started,
        )
    # last, what no run-time guard can see; run-time findings first because they say more
    sources = {"program": request.program.source, **{f"module {k}": v for k, v in request.program.modules.items()}}
    static = static_findings(sources)
    if static:
        return fail(
            "correctness",
            static[0],
            evidence={"findings": [f.detail for f in static]},
            seconds=time.perf_counter() - started,
        )
    return Verdict(
        "correctness",
        "pass",
        metrics={
            "trials": len(trials),
            "max_rel_error": state.worst_error,
            "deterministic": state.deterministic,
            "kernels": len(state.kernels),
            "autotune_configs": picks.offered,
        },
        evidence={
            "trials": [t.label() for t in trials],
            "kernels": sorted(state.kernels),
            "functions_run": sorted(state.functions | {k.rsplit(".", 1)[-1] for k in state.kernels}),
            "launches": state.launches,
            **({"autotune_unrunnable": picks.unrunnable} if picks.unrunnable else {}),
        },
        seconds=time.perf_counter() - started,
    )


def _run_trials(
    workload, wl_module, program_module, trials: list[Trial], state: _TrialState, picks: AutotunePicks, probe: bool
) -> tuple[tuple[Trial, Finding, int] | None, list[Trial]]:
    """Every trial with each autotuner's first config; then, unless a probe, each named case at seed 0 once per
    further config any autotuner offered. Returns (the failing trial, its finding, trials passed before it) or
    None, and the trials run."""
    from klineage.workload import make_case_init_inputs

    run = list(trials)
    index = 0
    while index < len(run):
        yield_turn()  # a timer waiting for the GPU alone measures between two trials, not after the whole check
        trial = run[index]
        picks.choose(trial.config)
        if trial.case not in state.models:
            init = make_case_init_inputs(wl_module, workload.cases[trial.case])
            ref_model = build(wl_module.Model, init).to(state.device)
            new_model = build(program_module.ModelNew, init).to(state.device)
            if state.compile:
                new_model = _compiled(new_model)
            state.models[trial.case] = (ref_model, copy.deepcopy(ref_model).double(), new_model)
            runs = state.first_runs  # run twice on each case's first trial: both runs must agree
        else:
            runs = 1
        finding = _run_trial(workload, wl_module, trial, runs, state)
        if finding is not None:
            return (trial, finding, index), run
        index += 1
        if index == len(run) and not probe:  # every trial so far passed: the configs not run yet, if any
            done = max(t.config for t in run)
            run += [
                Trial(name, 0, "normal", config)
                for config in range(done + 1, picks.offered)
                for name in workload.check_cases(state.device)
            ]
    return None, run


def launch_rows(launches: list) -> list[dict]:
    """Each distinct launch of a forward: kernel, integer constexprs, warps and program count."""
    rows = []
    for launch in launches:
        row = {
            "kernel": launch.kernel,
            "constexprs": dict(launch.constexprs),
            "num_warps": launch.num_warps,
            "programs": launch.programs,
        }
        if row not in rows:
            rows.append(row)
    return rows


def _probe_plan(workload, probe: dict, state):
    """The workload and trials a probe runs: its case alone; seed 0 with the workload's own inputs, then (unless
    the probe makes its inputs with the workload's hook, whose values may encode the probe) a fresh seed drawn
    from the next distribution, as a check does."""
    workload = replace(workload, cases={"probe": probe["case"]})
    if probe.get("keep_inputs"):
        workload = replace(workload, clobbered_inputs=())
    state.layout = probe.get("layout")
    state.probe_inputs = probe.get("inputs")
    state.compile = bool(probe.get("compile"))
    state.chunk = int(probe.get("chunk", 0))
    state.first_runs = int(probe.get("runs", 2))
    dists = workload.distributions
    second = Trial("probe", 1, "normal") if state.probe_inputs else Trial("probe", 1000, dists[1 % len(dists)])
    return workload, [Trial("probe", 0, "normal"), second][: int(probe.get("trials", 2))]


def _compiled(model):
    """The model with its forward compiled by torch.compile (Inductor): the launch path of family 26."""
    import torch

    torch._dynamo.reset()
    return torch.compile(model)


def _compiled_call(model, inputs):
    """A torch.compile probe's forward. Dynamo runs a frame eagerly under a dispatch mode, so the compute ban is
    off for it (the program's own check already enforced it), and Inductor's compile workers are not the
    program's threads; the launch tracer does not see Inductor's launches, so launch findings are skipped too."""
    from torch.utils._python_dispatch import _disable_current_modes

    from klineage.guards import TRACER

    TRACER.depth += 1
    try:
        with _disable_current_modes():
            return model(*inputs)
    finally:
        TRACER.depth -= 1


@dataclass
class _TrialState:
    """What persists across a correctness check's trials."""

    device: str
    guard_bytes: int
    models: dict = field(default_factory=dict)  # one ModelNew per case, reused across seeds: caching is seen
    buffers: dict = field(default_factory=dict)  # per case: input buffers refilled in place (same pointers)
    previous_outputs: list = field(default_factory=list)
    output_storages: set = field(default_factory=set)  # storages returned by earlier calls
    kernels: set = field(default_factory=set)
    launches: dict = field(default_factory=dict)  # per named case: what each launch asked for (launch_rows)
    worst_error: float = 0.0
    deterministic: bool = True
    layout: str | None = None
    functions: set = field(default_factory=set)  # program functions that ran, by name
    host_ops: frozenset = frozenset()  # PyTorch ops the workload allows on the host (HOST_OPS)
    probe_inputs: str | None = None  # a probe whose inputs come from the workload's make_probe_inputs(predicate)
    compile: bool = False  # a probe that runs forward under torch.compile
    chunk: int = 0  # a probe that compares outputs this many elements at a time (0: whole tensors)
    first_runs: int = 2  # runs of each case's first trial
    program_dir: str = ""  # where the program's files are: whose frames are the program's (_calls_into)
    input_cache: Path | None = None  # Settings.input_cache


def _inputs_for(trial: Trial, cpu_inputs: list, state: _TrialState) -> tuple[list, list]:
    """Device inputs in guarded buffers. A case's buffers are reused when the layout matches, refilled in place
    with the new seed's values: a program that caches by pointer then returns a stale answer."""
    import torch

    def layout(xs):
        return [(tuple(x.shape), x.stride(), x.dtype) if isinstance(x, torch.Tensor) else repr(x) for x in xs]

    held = state.buffers.get(trial.case)
    if held is not None and layout(held[0]) == layout(cpu_inputs):
        inputs, log = held
        for buffer, value in zip(inputs, cpu_inputs):
            if isinstance(buffer, torch.Tensor):
                buffer.copy_(value)
        inputs = [b if isinstance(b, torch.Tensor) else v for b, v in zip(inputs, cpu_inputs)]
    else:
        log = []
        inputs = [to_device(x, state.device, state.guard_bytes, log, state.layout) for x in cpu_inputs]
    state.buffers[trial.case] = (inputs, log)
    return inputs, log


def _run_trial(workload, wl_module, trial: Trial, runs: int, state: _TrialState) -> Finding | None:
    """Run the program `runs` times on one trial's inputs, then compute the reference (only then, so nothing of
    it is alive while the program runs) and judge each run."""
    import torch

    from klineage.guards import check_guards, launch_findings
    from klineage.workload import make_case_inputs

    device = state.device
    ref_model, ref64_model, new_model = state.models[trial.case]
    case = workload.cases[trial.case]
    made = make_case_inputs(wl_module, case, trial.seed, trial.distribution, state.probe_inputs, state.input_cache)
    inputs, input_log = _inputs_for(trial, made, state)
    originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    main_stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else None
    done = []  # (record, outputs, clones of outputs)
    for run in range(runs):
        for i in (*workload.mutated_inputs, *workload.clobbered_inputs):  # each run starts from the same inputs
            if run and isinstance(inputs[i], torch.Tensor):
                inputs[i].copy_(originals[i])
        outputs, failure = _guarded_call(new_model, inputs, state)
        if failure is not None:
            return failure
        record, outputs = outputs
        state.kernels.update(launch.kernel for launch in record.launches)
        if trial.seed == 0 and trial.case not in state.launches:
            state.launches[trial.case] = launch_rows(record.launches)
        clones = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outputs]
        done.append((record, outputs, clones))
    expected, ref64, ref64_inputs = _reference(wl_module, ref_model, ref64_model, originals)
    for record, outputs, clones in done:
        finding = (
            _outputs_finding(workload, clones, ref64, expected, state.previous_outputs, outputs, state.chunk)
            or check_guards(record.allocations + input_log)
            or _mutation_finding(workload, inputs, originals, ref64_inputs, state.chunk)
            or (None if state.compile else _replay_finding(record, outputs, state))
            or (None if state.compile else launch_findings(record, outputs, main_stream))
        )
        if finding is not None:
            return finding
        state.output_storages.update(_storages(outputs))
    for out, ref in zip(done[-1][2], ref64):
        if isinstance(out, torch.Tensor):
            pieces = _chunks(out, ref, state.chunk) if state.chunk else [(out, ref)]
            state.worst_error = max(state.worst_error, *(relative_error(o, r) for o, r in pieces))
    if runs == 2 and (finding := _disagreement(workload, done[0][2], done[1][2], state)):
        return finding
    state.previous_outputs.append((trial, done[-1][2]))
    return None


def _reference(wl_module, ref_model, ref64_model, originals: list) -> tuple[list, list, list]:
    """The reference's outputs in the inputs' dtypes, in float64, and the float64 inputs (mutated in place by a
    reference with in-place results)."""
    import torch

    with torch.no_grad():
        ref_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in originals]
        expected = flatten_outputs(ref_model(*ref_inputs))
        if getattr(wl_module, "NATIVE_REFERENCE", False):
            # the reference is an existing kernel (klineage.reference): it runs in its own dtypes only, so its
            # outputs (and in-place results) are the answer, compared with the dtype's tolerances
            ref64_inputs = [
                x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in ref_inputs
            ]
            ref64 = [e.double() if isinstance(e, torch.Tensor) and e.is_floating_point() else e for e in expected]
        else:  # fresh float64 copies (one copy each: a probe past 2^31 elements has no room for two)
            ref64_inputs = [
                (x.double() if x.is_floating_point() and x.dtype != torch.float64 else x.clone())
                if isinstance(x, torch.Tensor)
                else x
                for x in originals
            ]
            ref64 = flatten_outputs(ref64_model(*ref64_inputs))
    return expected, ref64, ref64_inputs


def _disagreement(workload, first_run: list, second_run: list, state: _TrialState) -> Finding | None:
    """Two runs on the same inputs: bitwise equal, or else within the dtype's tolerance of each other (then the
    program is not deterministic, which is allowed)."""
    if all(bitwise_equal(a, b) for a, b in zip(first_run, second_run)):
        return None
    state.deterministic = False
    for i, (a, b) in enumerate(zip(first_run, second_run)):
        tol = workload.tolerance(str(a.dtype).removeprefix("torch."))
        disagreement = compare_output(b, a.double(), a, tol, f"output {i}")
        if disagreement is not None:
            return Finding("nondeterministic", f"two runs on the same inputs disagree: {disagreement.detail}")
    return None


def _storages(outputs) -> set[int]:
    import torch

    return {o.untyped_storage().data_ptr() for o in outputs if isinstance(o, torch.Tensor) and o.numel()}


def _replay_finding(record, outputs, state: _TrialState) -> Finding | None:
    """A call that launched nothing and handed back a tensor an earlier call returned is serving a cache."""
    if not record.launches and _storages(outputs) & state.output_storages:
        return Finding("stale_output", "returned an earlier call's output tensor without launching a kernel")
    return None


@contextmanager
def _calls_into(found: set, root: str):
    """Record the names of program functions that run (host functions and, under the interpreter, kernels), those
    whose code is under `root`, the program's directory: the walk only simplifies code the workload exercises; a
    site in code that never ran would pass vacuously."""
    import sys

    def profile(frame, event, arg):
        if event == "call" and root and frame.f_code.co_filename.startswith(root):
            found.add(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


def _guarded_call(model, inputs, state: _TrialState):
    """One forward under every run-time guard; ((record, outputs), None) or (None, finding)."""
    import torch

    from klineage.guards import BackgroundThreadError, SideStreamError, TorchComputeError, guarded_forward

    try:
        guard = guarded_forward(state.guard_bytes, state.host_ops)
        with torch.no_grad(), guard as record, _calls_into(state.functions, state.program_dir):
            if state.compile:
                outputs = flatten_outputs(_compiled_call(model, inputs))
            else:
                outputs = flatten_outputs(model(*inputs))
            sync(state.device)
    except TorchComputeError as e:
        return None, Finding("torch_compute", str(e))
    except BackgroundThreadError as e:
        return None, Finding("background_thread", str(e))
    except SideStreamError as e:
        return None, Finding("side_stream", str(e))
    except Exception as e:  # MemoryError is an Exception; torch.OutOfMemoryError a RuntimeError
        return None, memory_finding(e) or Finding("forward_error", f"forward raised {type(e).__name__}: {str(e)[:500]}")
    return (record, outputs), None


def _mutation_finding(workload, inputs, originals, ref64_inputs, chunk: int = 0) -> Finding | None:
    import torch

    for i, (now, before) in enumerate(zip(inputs, originals)):
        if not isinstance(now, torch.Tensor):
            continue
        if i in workload.mutated_inputs:
            tol = workload.tolerance(str(now.dtype).removeprefix("torch."))
            pieces = _chunks(now, ref64_inputs[i], chunk) if chunk else [(now, ref64_inputs[i])]
            label = f"mutated input {i}"
            finding = next((f for o, r in pieces if (f := compare_output(o, r, r.to(now.dtype), tol, label))), None)
            if finding is not None:
                return finding
        elif i in workload.clobbered_inputs:
            continue  # the caller never reads it again: any contents will do
        elif not bitwise_equal(now, before):
            return Finding("input_mutated", f"input {i} was modified by the program (not declared in MUTATED_INPUTS)")
    return None


def _chunks(out, ref, chunk: int) -> list:
    """(out, ref) pieces of at most `chunk` elements each, as flat views (a probe's huge outputs)."""
    if out.numel() <= chunk or out.shape != ref.shape:
        return [(out, ref)]
    o, r = out.reshape(-1), ref.reshape(-1)
    return [(o[i : i + chunk], r[i : i + chunk]) for i in range(0, o.numel(), chunk)]


def _outputs_finding(
    workload, outputs, ref64, expected, previous_outputs, originals=None, chunk: int = 0
) -> Finding | None:
    """Judge output values (clones taken right after the call); `originals` are the returned objects, whose exact
    type is checked (a subclass can hide behind a plain clone). With `chunk` (a probe past 2^31 elements), each
    piece of `chunk` elements is judged on its own: its own scale for the absolute floor and its own error norm."""
    import torch

    for i, out in enumerate(originals or []):
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            return Finding("tensor_subclass", f"output {i} is a {type(out).__name__}, a Tensor subclass")
    if len(outputs) != len(expected):
        return Finding("shape_mismatch", f"program returned {len(outputs)} outputs, expected {len(expected)}")
    for i, (out, ref, exp) in enumerate(zip(outputs, ref64, expected)):
        tol = workload.tolerance(str(exp.dtype).removeprefix("torch."))
        if chunk and isinstance(out, torch.Tensor) and out.numel() > chunk and out.shape == exp.shape:
            finding = next(
                (
                    f
                    for (o, r), (_, e) in zip(_chunks(out, ref, chunk), _chunks(out, exp, chunk))
                    if (f := compare_output(o, r, e, tol, f"output {i}")) is not None
                ),
                None,
            )
        else:
            finding = compare_output(out, ref, exp, tol, f"output {i}")
        if finding is None:
            continue
        if finding.code == "mismatch":
            for trial, old in previous_outputs:  # a wrong answer equal to an earlier answer is a cached one
                if i < len(old) and bitwise_equal(out, old[i]):
                    return Finding("stale_output", f"output {i} is bit-identical to the output for {trial.label()}")
        return finding
    return None
