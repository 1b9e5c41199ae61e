"""The three gates: compile, correctness, profile. Each returns a `Verdict` value and never raises.

The `*_job` functions run inside a sandbox child (see sandbox.py) and do the work; `run_gate` is the caller's side:
it builds the job, runs it in the sandbox and turns a crash, hang or out-of-memory into a failing verdict."""

from __future__ import annotations

import copy
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from klineage.compare import Finding, bitwise_equal, compare_output, flatten_outputs, relative_error
from klineage.config import Settings, device_name, versions
from klineage.program import Program
from klineage.sandbox import Job, Sandbox, SandboxResult, off_gpu, yield_turn

GATES = ("compile", "correctness", "profile")


@dataclass(frozen=True)
class Verdict:
    """A gate's result. status: pass | fail | error | skip. `code` is a stable slug for the first reason
    (empty on pass); `metrics` are numbers worth tabulating; `evidence` is what a reader needs to believe it."""

    gate: str
    status: str
    code: str = ""
    reason: str = ""
    metrics: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> Verdict:
        return Verdict(**d)


def _fail(gate: str, finding: Finding, **extra) -> Verdict:
    return Verdict(gate, "fail", finding.code, finding.detail, **extra)


# --- shared child-side setup --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateRequest:
    """What a sandboxed gate job receives."""

    workload_path: str
    program: Program
    device: str  # "cpu" or "cuda"
    settings: Settings
    target: str = "sm_90"
    ceilings: dict | None = None
    # A condition probe (see probe.py): check this one case only. {"case": {...}, "layout": None | "strided" |
    # "misaligned"; optional: "inputs": predicate (inputs from the workload's make_probe_inputs), "keep_inputs":
    # True (CLOBBERED_INPUTS withdrawn: every input must come back unchanged), "compile": True (forward under
    # torch.compile), "trials": 1 or 2, "runs": 1 (the first trial once), "chunk": N (compare outputs N elements at
    # a time: a probe past 2^31 elements cannot hold float64 copies of whole outputs)}
    probe: dict | None = None


def _prepare(request: GateRequest, interpret: bool):
    """Import the workload and program in this (child) process, with the interpreter fixes and launch tracer."""
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
        from klineage.interp import patch_interpreter

        patch_interpreter()
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    from klineage.guards import install_tracer
    from klineage.program import install
    from klineage.workload import import_file, workload_from_module

    install_tracer()
    path = Path(request.workload_path)
    source = path.read_text()
    wl_module = import_file(path, "klineage_workload")
    workload = workload_from_module(path, source, wl_module)
    program_module = install(request.program)
    if not isinstance(getattr(program_module, "ModelNew", None), type):
        raise ImportError("program defines no class ModelNew")
    return workload, wl_module, program_module


def _build(cls, init_inputs):
    import torch

    torch.manual_seed(42)  # same weights for Model and ModelNew, as KernelBench does
    return cls(*copy.deepcopy(init_inputs))


def _to_device(x, device: str, guard_bytes: int, log: list, layout: str | None = None):
    """Place a harness-made input on the device inside a guarded buffer (so writes past inputs are seen too).
    A probe's `layout` makes it non-contiguous ("strided": rows padded by 8 elements, vectors at stride 2) or
    misaligned by one element ("misaligned": the base is no longer 16-byte aligned)."""
    import torch

    from klineage.guards import guarded_empty

    if not isinstance(x, torch.Tensor):
        return x
    stride, shift = x.stride(), 0
    if layout == "strided" and x.dim() == 1:
        stride = (2,)  # every other element of a buffer twice as long
    elif layout == "strided" and x.dim() >= 2:
        padded = [1] * x.dim()
        padded[-2] = x.shape[-1] + 8
        for i in range(x.dim() - 3, -1, -1):
            padded[i] = padded[i + 1] * x.shape[i + 1]
        stride = tuple(padded)
    elif layout == "misaligned" and x.is_floating_point():
        shift = x.element_size()
    y = guarded_empty(x.shape, stride, x.dtype, device, guard_bytes, "input", log, shift_bytes=shift)
    y.copy_(x)
    return y


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


# --- correctness --------------------------------------------------------------------------------------------------


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
    try:
        workload, wl_module, program_module = _prepare(request, interpret=device == "cpu")
    except Exception as e:
        return Verdict("correctness", "fail", "import_error", f"{type(e).__name__}: {e}")
    state = _TrialState(device, request.settings.guard_bytes, host_ops=frozenset(workload.host_ops))
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
        return _fail(
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
        return _fail(
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
            ref_model = _build(wl_module.Model, init).to(state.device)
            new_model = _build(program_module.ModelNew, init).to(state.device)
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


class AutotunePicks:
    """Inside a correctness check, every `@triton.autotune` takes one chosen config of its pruned list (the
    `choose`n index, modulo the list's length), run twice as a benchmark would (which exposes an accumulating
    kernel without `reset_to_zero`), instead of timing them all. On a GPU the autotuner picks by time, so the timed
    program may run any config: memory's autotune list on the naive softmax passed the gate with the config its
    benchmark chose there, and the bench's re-check with hidden seeds found half the bench case's rows wrong (a
    4096-wide tile on 8192-wide rows, at x1.87; H200, run 20). `offered` is the most configs any autotuner had
    that the device runs.
    Every later trial whose config differs starts the autotuners afresh; Triton's on-disk tuning cache is not
    read.
    A config the device refuses (out of shared memory or registers, a failed ptxas or compile-time assert) is one
    Triton's autotuner times as infinite and never picks, so it is left out (`unrunnable`) and the pick moves to
    the next config; only an autotuner none of whose configs runs fails. Without this, the attention expert's loop
    at 4 stages failed the gate on its 128x128 config (294944 bytes of shared memory, 232448 on the H200), though
    the autotuner would have run one of the configs that fit (H200, run 21)."""

    def __init__(self) -> None:
        self._pruned: dict[str, set[str]] = {}  # per autotuned kernel, the configs its pruned lists held
        self.chosen: dict[str, str] = {}  # per autotuned kernel, the config it ran last (a failure names it)
        self.unrunnable: dict[str, dict[str, str]] = {}  # per autotuned kernel: config -> why the device refused it
        self._config = 0
        self._tuners: list = []
        self._saved: dict = {}

    @property
    def offered(self) -> int:
        return (
            max(
                (len(configs - self.unrunnable.get(name, {}).keys()) for name, configs in self._pruned.items()),
                default=1,
            )
            or 1
        )

    def choose(self, config: int) -> None:
        if config != self._config:
            for tuner in self._tuners:
                tuner.cache.clear()
        self._config = config

    def __enter__(self) -> AutotunePicks:
        from triton.runtime.autotuner import Autotuner

        picks, prune, run = self, Autotuner.prune_configs, Autotuner.run
        refused = _device_refusals()

        def prune_to_one(tuner, kwargs):
            name, pruned = tuner.base_fn.__name__, prune(tuner, kwargs)
            picks._pruned.setdefault(name, set()).update(str(c) for c in pruned)
            if tuner not in picks._tuners:
                picks._tuners.append(tuner)
            skip = picks.unrunnable.get(name, {})
            runnable = [c for c in pruned if str(c) not in skip] or pruned  # none runs: the first fails, as on a GPU
            config = runnable[picks._config % len(runnable)]
            picks.chosen[name] = str(config)
            return [config]

        def two_calls(kernel_call, quantiles=None):
            kernel_call()
            kernel_call()
            return [0.0, 0.0, 0.0]

        def run_runnable(tuner, *args, **kwargs):
            """Autotuner.run, again without a config the device refused (the autotuner's bench swallowed the error
            as an infinite time; the launch of its only config raised it again)."""
            name = tuner.base_fn.__name__
            while True:
                try:
                    return run(tuner, *args, **kwargs)
                except refused as e:
                    skip = picks.unrunnable.setdefault(name, {})
                    if picks.chosen.get(name) in skip or len(skip) + 1 >= len(tuner.configs):
                        raise  # every config refused: the launch fails on the GPU too
                    skip[picks.chosen[name]] = f"{type(e).__name__}: {str(e)[:200]}"
                    tuner.cache.clear()

        self._saved = {
            name: Autotuner.__dict__[name] for name in ("prune_configs", "do_bench", "check_disk_cache", "run")
        }
        Autotuner.prune_configs = prune_to_one
        Autotuner.do_bench = property(lambda tuner: two_calls)
        Autotuner.check_disk_cache = lambda tuner, key, configs, bench: bench() or False
        Autotuner.run = run_runnable
        return self

    def __exit__(self, *exc) -> None:
        from triton.runtime.autotuner import Autotuner

        for name, value in self._saved.items():
            setattr(Autotuner, name, value)
        for tuner in self._tuners:  # what a later job in this process times is picked by time again
            tuner.cache.clear()


def _device_refusals() -> tuple[type[BaseException], ...]:
    """The errors for which Triton's autotuner times a config as infinite (`Autotuner._bench`): the device or its
    compiler refused the config before anything ran."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import OutOfResources, PTXASError

    return OutOfResources, CompileTimeAssertionFailure, PTXASError


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
        inputs = [_to_device(x, state.device, state.guard_bytes, log, state.layout) for x in cpu_inputs]
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
    inputs, input_log = _inputs_for(
        trial,
        make_case_inputs(wl_module, workload.cases[trial.case], trial.seed, trial.distribution, state.probe_inputs),
        state,
    )
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
    if runs == 2:
        first_run, second_run = done[0][2], done[1][2]
        if not all(bitwise_equal(a, b) for a, b in zip(first_run, second_run)):
            state.deterministic = False
            for i, (a, b) in enumerate(zip(first_run, second_run)):
                tol = workload.tolerance(str(a.dtype).removeprefix("torch."))
                disagreement = compare_output(b, a.double(), a, tol, f"output {i}")
                if disagreement is not None:
                    return Finding("nondeterministic", f"two runs on the same inputs disagree: {disagreement.detail}")
    state.previous_outputs.append((trial, done[-1][2]))
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
def _calls_into(found: set):
    """Record the names of program functions that run (host functions and, under the interpreter, kernels): the
    walk only simplifies code the workload exercises; a site in code that never ran would pass vacuously."""
    import sys

    root = os.environ.get("KLINEAGE_PROGRAM_DIR", "")

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
        with torch.no_grad(), guard as record, _calls_into(state.functions):
            if state.compile:
                outputs = flatten_outputs(_compiled_call(model, inputs))
            else:
                outputs = flatten_outputs(model(*inputs))
            _sync(state.device)
    except TorchComputeError as e:
        return None, Finding("torch_compute", str(e))
    except BackgroundThreadError as e:
        return None, Finding("background_thread", str(e))
    except SideStreamError as e:
        return None, Finding("side_stream", str(e))
    except torch.OutOfMemoryError as e:
        return None, Finding("oom", f"out of device memory: {str(e)[:200]}")
    except Exception as e:
        return None, Finding("forward_error", f"forward raised {type(e).__name__}: {str(e)[:500]}")
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


# --- compile ------------------------------------------------------------------------------------------------------


def compile_job(request: GateRequest) -> Verdict:
    started = time.perf_counter()
    try:
        if request.device == "cuda":
            verdict = _compile_on_gpu(request)
        else:
            verdict = _compile_for_target(request)
    except ImportError as e:
        verdict = Verdict("compile", "fail", "import_error", f"program failed to import: {e}")
    return Verdict(**{**asdict(verdict), "seconds": time.perf_counter() - started})


def _arch_number(target: str) -> int:
    return int(target.removeprefix("sm_"))


# The shared memory one block may opt in to, per compute capability (CUDA C++ Programming Guide, technical
# specifications per compute capability); the H200's loader reported 232448 for sm_90 (run 21).
SHARED_MEMORY_LIMIT = {
    80: 166912,
    86: 101376,
    87: 166912,
    89: 101376,
    90: 232448,
    100: 232448,
    103: 232448,
    120: 101376,
}


def _compile_for_target(request: GateRequest) -> Verdict:
    """No GPU: drive the program's forward on CPU tensors with every launch replaced by a compile for the target.
    This compiles exactly the specializations the launcher asks for (autotune configs included), on every case.
    A kernel that needs more shared memory than the target has raises OutOfResources as the GPU's loader would, so
    an autotuner passes over that config and a plain launch of it fails the gate, as on the GPU."""
    import torch
    import triton
    import triton.runtime.autotuner as autotuner
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.errors import OutOfResources
    from triton.runtime.jit import JITFunction, create_function_from_signature

    from klineage.sass import kernel_metrics
    from klineage.workload import make_case_init_inputs, make_case_inputs

    workload, wl_module, program_module = _prepare(request, interpret=False)
    target = GPUTarget("cuda", _arch_number(request.target), 32)
    shared_limit = SHARED_MEMORY_LIMIT.get(_arch_number(request.target))

    def over_limit(metrics: dict) -> bool:  # what the target's loader refuses to load
        return shared_limit is not None and metrics.get("shared_bytes", 0) > shared_limit

    backend = make_backend(target)
    compiled: dict[str, dict] = {}
    errors: list[str] = []
    binders = {}

    def compile_instead(self, *args, grid, warmup, **kwargs):
        kwargs["debug"] = kwargs.get("debug", self.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        binder = binders.get(id(self)) or create_function_from_signature(self.signature, self.params, backend)
        binders[id(self)] = binder
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
        key = f"{self.__name__}|{signature}|{sorted(constexprs.items())}|{sorted(attrs.items())}|{options.num_warps}"
        key += f"|{options.num_stages}"
        if key not in compiled:
            label = _spec_label(constexprs, options)
            try:
                kernel = triton.compile(
                    ASTSource(self, signature, constexprs, attrs), target=target, options=options.__dict__
                )
            except Exception as e:
                errors.append(f"{self.__name__} {label}: {type(e).__name__}: {str(e)[-600:]}")
                compiled[key] = {"name": self.__name__, "error": True}
                return None
            metrics = kernel_metrics(kernel, request.target)
            metrics["specialization"] = label
            compiled[key] = metrics
        if over_limit(compiled[key]):
            raise OutOfResources(compiled[key]["shared_bytes"], shared_limit, "shared memory")
        return None

    def one_call_bench(kernel_call, quantiles=None):
        kernel_call()  # compiles this config through compile_instead
        return [float(len(compiled))] * 3

    JITFunction.run = compile_instead
    autotuner.Autotuner.do_bench = property(lambda self: one_call_bench)
    forward_errors = []
    for name, case in workload.cases.items():
        init = make_case_init_inputs(wl_module, case)
        model = _build(program_module.ModelNew, init)
        inputs = make_case_inputs(wl_module, case, 0)
        before = len(compiled)
        try:
            with torch.no_grad():
                model(*inputs)
        except OutOfResources as e:  # a launch the target's loader would refuse, no autotuner config left to run
            errors.append(f"case {name}: {type(e).__name__}: {str(e)[-600:]} (the {request.target} limit)")
        except Exception as e:  # outputs are garbage without launches; only a failure before any launch counts
            if len(compiled) == before:
                forward_errors.append(f"case {name}: {type(e).__name__}: {str(e)[:300]}")
    refused = [m for m in compiled.values() if over_limit(m)]
    kernels = [m for m in compiled.values() if not m.get("error") and m not in refused]
    evidence = {"specializations": kernels, "target": request.target}
    if refused:  # configs an autotuner passed over: they would never run on the target
        evidence["over_shared_memory"] = [
            f"{m['name']} {m['specialization']}: {m['shared_bytes']} bytes" for m in refused
        ]
    if errors:
        return Verdict("compile", "fail", "compile_error", errors[0], evidence={**evidence, "errors": errors})
    if not kernels:
        why = forward_errors[0] if forward_errors else "forward launched no Triton kernel"
        return Verdict("compile", "fail", "no_kernel_launch", why, evidence=evidence)
    return Verdict("compile", "pass", metrics=_summarize(kernels), evidence={**evidence, "warnings": forward_errors})


def _spec_label(constexprs: dict, options) -> str:
    values = ", ".join(f"{v}" for v in constexprs.values())
    return f"[{values}] warps={options.num_warps} stages={options.num_stages}"


def _summarize(kernels: list[dict]) -> dict:
    """The worst case over specializations: what a reader checks first."""
    return {
        "specializations": len(kernels),
        "max_registers": max((k.get("registers", 0) for k in kernels), default=0),
        "spill_bytes": sum(k.get("spill_store_bytes", 0) + k.get("spill_load_bytes", 0) for k in kernels),
        "max_shared_bytes": max((k.get("shared_bytes", 0) for k in kernels), default=0),
        "max_load_bits": max((k.get("max_load_bits", 0) for k in kernels), default=0),
        "max_store_bits": max((k.get("max_store_bits", 0) for k in kernels), default=0),
        "tensor_core_instructions": sum(k.get("tensor_core_instructions", 0) for k in kernels),
        "tma_instructions": sum(k.get("tma_instructions", 0) for k in kernels),
    }


def _compile_on_gpu(request: GateRequest) -> Verdict:
    """On a GPU: launch for real on every case and read what the launches compiled out of Triton's caches."""
    import torch
    from triton.runtime.jit import JITFunction

    from klineage.sass import kernel_metrics
    from klineage.workload import make_case_init_inputs, make_case_inputs, on_device

    workload, wl_module, program_module = _prepare(request, interpret=False)
    seen: dict[int, JITFunction] = {}
    original = JITFunction.run

    def run(self, *args, **kwargs):
        seen[id(self)] = self
        return original(self, *args, **kwargs)

    JITFunction.run = run
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    for name, case in workload.cases.items():
        yield_turn()
        model = _build(program_module.ModelNew, make_case_init_inputs(wl_module, case)).cuda()
        inputs = [on_device(x, "cuda") for x in make_case_inputs(wl_module, case, 0)]
        try:
            with torch.no_grad():
                model(*inputs)
            torch.cuda.synchronize()
        except Exception as e:
            return Verdict("compile", "fail", "compile_error", f"case {name}: {type(e).__name__}: {str(e)[-600:]}")
    kernels = []
    with off_gpu():  # ptxas and nvdisasm on the host: no reason for a timer to wait for them
        for fn in seen.values():
            for cache in fn.device_caches.values():
                for kernel in cache[0].values():
                    metrics = kernel_metrics(kernel, arch)
                    metrics["registers"] = int(getattr(kernel, "n_regs", metrics.get("registers", 0)) or 0)
                    metrics["spill_store_bytes"] = int(getattr(kernel, "n_spills", 0) or 0)
                    kernels.append(metrics)
    if not kernels:
        return Verdict("compile", "fail", "no_kernel_launch", "forward launched no Triton kernel")
    return Verdict(
        "compile", "pass", metrics=_summarize(kernels), evidence={"specializations": kernels, "target": arch}
    )


# --- profile ------------------------------------------------------------------------------------------------------


def ceilings_job(_: Any = None) -> dict:
    from klineage.timing import measure_ceilings

    return measure_ceilings()


def _input_sets(wl_module, case: dict, count: int, device: str = "cuda") -> list[list]:
    """`count` input sets of one case on the GPU, seeds 0..count-1, each input in its own layout: timing cycles
    through them so the cache is not what is measured."""
    from klineage.workload import make_case_inputs, on_device

    return [[on_device(x, device) for x in make_case_inputs(wl_module, case, seed)] for seed in range(count)]


def _rotating(model, sets: list[list]):
    """A no-argument call of `model` on the next input set each time."""
    import itertools

    import torch

    cycle = itertools.cycle(sets)

    def call():
        with torch.no_grad():
            return model(*next(cycle))

    return call


def profile_job(request: GateRequest) -> Verdict:
    """Time the program on the workload's bench case against PyTorch eager, interleaved."""

    from klineage.timing import roofline, time_calls
    from klineage.workload import case_roofline, make_case_init_inputs

    started = time.perf_counter()
    workload, wl_module, program_module = _prepare(request, interpret=False)
    case_name = workload.bench_case()
    case = workload.cases[case_name]
    init = make_case_init_inputs(wl_module, case)
    model = _build(program_module.ModelNew, init).cuda()
    reference = _build(wl_module.Model, init).cuda()
    settings = request.settings
    sets = _input_sets(wl_module, case, settings.rotate_sets)

    program_t, eager_t = time_calls(
        [_rotating(model, sets), _rotating(reference, sets)],
        settings.profile_warmup_ms,
        settings.profile_rep_ms,
        settings.profile_min_reps,
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


def profile_pair_job(payload: tuple[GateRequest, Program]) -> dict:
    """Time a parent program and a child program interleaved on the bench case (the same input sets for both):
    the measured effect of one step, with each side's spread."""

    from klineage.program import install
    from klineage.timing import time_calls
    from klineage.workload import make_case_init_inputs

    started = time.perf_counter()
    request, child = payload
    workload, wl_module, parent_module = _prepare(request, interpret=False)
    child_module = install(child)
    case = workload.cases[workload.bench_case()]
    init = make_case_init_inputs(wl_module, case)
    parent_model = _build(parent_module.ModelNew, init).cuda()
    child_model = _build(child_module.ModelNew, init).cuda()
    sets = _input_sets(wl_module, case, request.settings.rotate_sets)
    settings = request.settings
    calls = [_rotating(parent_model, sets), _rotating(child_model, sets)]
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


# --- the caller's side --------------------------------------------------------------------------------------------

JOBS = {
    "compile": "klineage.gates:compile_job",
    "correctness": "klineage.gates:correctness_job",
    "profile": "klineage.gates:profile_job",
}


def run_gate(gate: str, request: GateRequest, sandbox: Sandbox, alone: bool = False) -> Verdict:
    """Run one gate in the sandbox; a crash, timeout or OOM of the child is a failing verdict, never an exception.
    `alone`: the job holds its GPU alone for its whole run, not side by side with other jobs' checks."""
    if gate == "profile" and request.device != "cuda":
        return Verdict(
            "profile",
            "skip",
            "no_gpu",
            "no GPU: no time was taken; the compile gate's static metrics are all there is",
        )
    env = {"KLINEAGE_DEVICE": request.device}
    if gate == "correctness" and request.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    if alone:
        env["KLINEAGE_GPU_ALONE"] = "1"
    job = Job(JOBS[gate], request, env=env, timeout_s=request.settings.timeout_s)
    result = sandbox.run(job)
    return verdict_from_result(gate, result)


def verdict_from_result(gate: str, result: SandboxResult) -> Verdict:
    if result.ok and isinstance(result.value, Verdict):
        value = result.value
        evidence = dict(value.evidence)
        if value.status != "pass" and result.log:
            evidence["log"] = result.log[-2000:]
        return Verdict(
            value.gate, value.status, value.code, value.reason, value.metrics, evidence, value.seconds or result.seconds
        )
    code = {"timeout": "timeout", "oom": "oom", "crash": "crash"}.get(result.kind, "error")
    status = "fail" if code in ("timeout", "oom", "crash") else "error"
    reason = result.error
    if "illegal memory access" in result.log or "misaligned address" in result.log:
        code, reason = "crash", f"{reason}: illegal memory access"
    return Verdict(gate, status, code, reason, evidence={"log": result.log[-2000:]}, seconds=result.seconds)
