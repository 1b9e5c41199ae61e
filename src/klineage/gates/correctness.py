"""The correctness gate: every output compared with a float64 reference on the workload's cases and fresh seeds,
under run-time guards (poisoned buffers, input mutation, two runs agreeing, launch traces, no PyTorch compute in
forward), then the static findings. Runs inside a sandbox child, the judge; the program runs in a candidate process
the judge forks before anything else (gates.candidate) and only its outputs' values come back. A self-reference
workload's reference (an existing program, someone else's code) runs in a reference process of its own
(gates.confined), and only its outputs' values come back too. The judge passes a program on what it compares
itself; the candidate's own findings can only fail it. `plan_trials` is also the
audit's plan."""

from __future__ import annotations

import copy
import math
import random
import secrets
import time
from dataclasses import dataclass, field, replace

from klineage.compare import Finding, bitwise_equal, compare_output, flatten_outputs, relative_error
from klineage.gates.candidate import CandidateGone, installed_roots, judged, package_root, spec_for
from klineage.gates.common import GateRequest, Verdict, build, fail, prepare_workload
from klineage.sandbox import yield_turn
from klineage.wire import WireError, pack_values, tensor


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


# the parts of a check outside its trials, in order, each recorded in seconds (evidence `phase_seconds`)
CHECK_PHASES = ("candidate_start", "reference_start", "workload", "static_scan")


def correctness_job(request: GateRequest) -> Verdict:
    from klineage.gates.confined import fork_reference

    started = time.perf_counter()
    probe = request.probe or {}
    # the workload file is not among what it may read: the correctness candidate makes nothing of its own
    spec = spec_for(
        request,
        layout=probe.get("layout"),
        compile=bool(probe.get("compile")),
        needs=(package_root(), *installed_roots(request.program)),
    )
    # judged forks the candidate first, then the reference process beside it: nothing of the workload, its inputs
    # or its reference's answers exists yet here
    verdict = judged(
        "correctness",
        spec,
        lambda candidate, forked: _correctness(request, candidate, forked, started),
        alongside=lambda: fork_reference(request),
    )
    return verdict if verdict.seconds else replace(verdict, seconds=time.perf_counter() - started)


def written_lines(program) -> dict[str, set[int]]:
    """Per carried module whose installed text is known, the lines that are not the installed file's: only those
    count for the static scan. The package's own lines are trusted by provenance, as the static policy trusts an
    unmodified installed copy (policy.unmodified_installed): FlagGems's bmm, mv, addmm and baddbmm read os.environ
    at import, and their starts failed the scan on an unchanged copy (RESULTS.md#wild). A line a rewrite wrote is
    judged like any other."""
    from klineage.policy import changed_lines
    from klineage.policy.names import installed_source

    out = {}
    for name, source in program.modules.items():
        base = installed_source(name)
        if base is not None:
            out[f"module {name}"] = changed_lines(base, source)
    return out


def _correctness(request: GateRequest, candidate, forked, started: float) -> Verdict:
    """The check, once a self-reference workload's reference process (gates.confined), forked beside the candidate
    before the workload is imported here, said hello; judged ends both."""
    from klineage.gates.confined import REFERENCE_ERROR, ReferenceUnavailable, reference_ready

    # where a check's seconds go outside its trials (processes started, programs imported, the static scan): on the
    # H100 a FlagGems candidate's check spent 2.5-3.0 s in its trials and 8.1-13.5 s around them (RESULTS.md#timer-wait)
    phases = {"candidate_start": round(time.perf_counter() - started, 2)}
    try:
        reference = reference_ready(forked)
    except ReferenceUnavailable as e:
        return Verdict("correctness", "fail", REFERENCE_ERROR, str(e), seconds=time.perf_counter() - started)
    phases["reference_start"] = round(max(0.0, time.perf_counter() - started - phases["candidate_start"]), 2)
    return _checked(request, candidate, reference, started, phases)


def _checked(request: GateRequest, candidate, reference, started: float, phases: dict) -> Verdict:
    from klineage.guards import static_findings

    device = request.device
    began = time.perf_counter()
    try:
        workload, wl_module = prepare_workload(request, interpret=device == "cpu")
    except Exception as e:
        return Verdict("correctness", "fail", "import_error", f"{type(e).__name__}: {e}")
    phases["workload"] = round(time.perf_counter() - began, 2)
    state = _TrialState(device, candidate, host_ops=tuple(workload.host_ops), input_cache=request.settings.inputs_dir)
    state.reference = reference
    if request.settings.check_draw is not None:  # a walk's checks replay (Settings.check_draw)
        state.draw = request.settings.check_draw
        state.rng = random.Random(state.draw)
    trials = plan_trials(
        workload, device, request.settings.seeds, request.settings.seed_base, request.settings.seed_case
    )
    if request.probe is not None:  # a probe: one case that violates one condition
        workload, trials = _probe_plan(workload, request.probe, state)
    elif (drawn := domain_case(workload, state.draw)) is not None:  # on a GPU too: it is a small case there
        workload = replace(workload, cases={**workload.cases, DOMAIN_CASE: drawn})
        trials.append(Trial(DOMAIN_CASE, request.settings.seed_base, "normal"))
        state.domain_case = drawn
    finding, trials = _run_trials(workload, wl_module, trials, state, probe=request.probe is not None)
    picks = state.autotune
    if finding is not None:
        trial, finding, index = finding
        tuned = {"autotune_configs": dict(picks.get("chosen", {}))} if picks.get("chosen") else {}
        if picks.get("unrunnable"):
            tuned["autotune_unrunnable"] = picks["unrunnable"]
        return fail(
            "correctness",
            finding,
            metrics={"trials_passed": index, "trials": len(trials)},
            evidence={
                "trial": trial.label(),
                "kernels": sorted(state.kernels),
                "trial_seconds": state.trial_seconds,
                "phase_seconds": phases,
                **tuned,
                **_drawn(state),
            },
            seconds=time.perf_counter() - started,
        )
    # last, what no run-time guard can see; run-time findings first because they say more
    sources = {"program": request.program.source, **{f"module {k}": v for k, v in request.program.modules.items()}}
    began = time.perf_counter()
    static = static_findings(sources, written_lines(request.program))
    phases["static_scan"] = round(time.perf_counter() - began, 2)
    if static:
        return fail(
            "correctness",
            static[0],
            evidence={"findings": [f.detail for f in static], "phase_seconds": phases},
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
            "autotune_configs": int(picks.get("offered", 1)),
        },
        evidence={
            "trials": [t.label() for t in trials],
            "trial_seconds": state.trial_seconds,  # each trial's, in order: where a slow check spends its time
            "phase_seconds": phases,  # and outside them: candidate_start, reference_start, workload, static_scan
            "kernels": sorted(state.kernels),
            "functions_run": sorted(state.functions | {k.rsplit(".", 1)[-1] for k in state.kernels}),
            "launches": state.launches,
            "user_like_runs": state.user_like_runs,
            **_drawn(state),
            **({"autotune_unrunnable": picks["unrunnable"]} if picks.get("unrunnable") else {}),
        },
        seconds=time.perf_counter() - started,
    )


def _run_trials(
    workload, wl_module, trials: list[Trial], state: _TrialState, probe: bool
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
        began = time.perf_counter()
        try:
            if trial.case not in state.models:
                init = make_case_init_inputs(wl_module, workload.cases[trial.case])
                state.models[trial.case] = _reference_models(wl_module, trial.case, init, state)
                tensors, described = pack_values(init, "init")
                meta = {"op": "init", "case": trial.case, "init": described, "host_ops": list(state.host_ops)}
                state.candidate.request(meta, tensors, body_limit=0)
                # run twice on each case's first trial: both runs must agree (the drawn case once: the named cases
                # showed the program deterministic, and the drawn case is about sizes)
                runs = 1 if trial.case == DOMAIN_CASE else state.first_runs
                users = [0] + [_user_seed(state) for _ in range(runs - 1)]
            else:
                runs = 1
                users = [_user_seed(state) if state.rng.random() < USER_LIKE_SHARE else 0]
            finding = _run_trial(workload, wl_module, trial, runs, state, [0] * runs if probe else users)
        except CandidateGone as e:
            finding = Finding(e.code, e.detail)
        state.trial_seconds.append(round(time.perf_counter() - began, 2))
        if finding is not None:
            return (trial, finding, index), run
        index += 1
        if index == len(run) and not probe:  # every trial so far passed: the configs not run yet, if any
            done = max(t.config for t in run)
            run += [
                Trial(name, 0, "normal", config)
                for config in range(done + 1, int(state.autotune.get("offered", 1)))
                for name in workload.check_cases(state.device)
                if name != DOMAIN_CASE  # the named cases: the drawn one runs once, with the first configs
            ]
    return None, run


def _reference_models(wl_module, case: str, init: list, state: _TrialState) -> tuple:
    """The reference for a case in its dtypes and in float64: built here from the workload's Model, or, for a
    self-reference workload, built in its reference process (one model: it runs in its own dtypes only)."""
    if state.reference is not None:
        from klineage.gates.confined import confined_model

        return confined_model(state.reference, case, init, state.device), None
    ref_model = build(wl_module.Model, init).to(state.device)
    return ref_model, copy.deepcopy(ref_model).double()


DOMAIN_CASE = "domain"

# Runs like a user's call (grad mode on, fresh allocations holding random values, not poison; gates.candidate): the
# second run of each named case's first trial, and each later trial with this chance, drawn per check, so a program
# that behaves only while it sees the harness (NaN in a fresh buffer, no_grad) fails without telling which call is
# judged. The first run of a case is always poisoned: an unwritten output is named as such there.
USER_LIKE_SHARE = 0.5


def _user_seed(state: _TrialState) -> int:
    return state.rng.randrange(1, 2**62)


def domain_case(workload, seed: int) -> dict | None:
    """One more case for a check, drawn from the workload's DOMAIN: sizes outside the named cases are checked too,
    so a program tuned to pass exactly those (a block hard-coded for the tiny case) fails. The CPU's seed case with
    each integer size the domain ranges over (a [low, high] pair) or lists redrawn between the seed case's value and
    DOMAIN_GROWTH times the largest a named CPU case gives it, never a value a named case has: a workload with a
    single CPU case gets a shape of its own too. No size falls below the seed case's (a workload's other keys, such
    as cross-entropy's ignored count, could stop making sense), and the drawn sizes multiply to at most DOMAIN_GROWTH
    times the seed case's (the interpreter runs it as fast as a small named case; on a GPU it is a small case
    among the bench-sized ones). dtype, layout and flags stay the seed case's. `seed` is drawn per check (the
    caller's), so a program cannot know the shape in advance. None where the domain redraws nothing."""
    named = [workload.cases[n] for n in workload.check_cases("cpu")]
    base = workload.cases.get(workload.seed_case("cpu"))
    if not named or base is None:
        return None
    rng = random.Random(f"{workload.hash}:{seed}")
    choices = {key: fresh for key, allowed in workload.domain.items() if (fresh := _fresh(key, allowed, base, named))}
    budget = DOMAIN_GROWTH * math.prod(base[key] for key in choices)
    drawn: dict = {}
    for key in rng.sample(sorted(choices), len(choices)):  # each size within what the others leave of the budget
        rest = math.prod(base[k] for k in choices if k not in drawn and k != key)
        fits = [v for v in choices[key] if v * rest * math.prod(drawn.values()) <= budget]
        drawn[key] = rng.choice(fits) if fits else base[key]
    return {**base, **drawn} if any(drawn[k] != base[k] for k in drawn) else None


DOMAIN_GROWTH = 4


def _fresh(key: str, allowed, base: dict, named: list[dict]) -> list[int]:
    """The values `key` may be drawn from (see domain_case); empty where it is not an integer size."""
    seen = {c.get(key) for c in named if type(c.get(key)) is int}
    if type(base.get(key)) is not int or not isinstance(allowed, (list, tuple)) or not seen or not allowed:
        return []
    if not all(type(v) is int for v in allowed):
        return []
    low, top = max(allowed[0], base[key]), DOMAIN_GROWTH * max(seen)
    ranged = len(allowed) == 2 and allowed[0] < allowed[1]
    values = range(low, min(allowed[1], top) + 1) if ranged else [v for v in allowed if low <= v <= top]
    return [v for v in values if v not in seen]


def _drawn(state) -> dict:
    mapped = {"cuda_mapped": list(state.cuda_mapped)} if state.cuda_mapped else {}
    drawn = {"domain_case": state.domain_case, "draw": state.draw} if state.domain_case is not None else {}
    return {**mapped, **drawn}


def _probe_plan(workload, probe: dict, state):
    """The workload and trials a probe runs: its case alone; seed 0 with the workload's own inputs, then (unless
    the probe makes its inputs with the workload's hook, whose values may encode the probe) a fresh seed drawn
    from the next distribution, as a check does."""
    workload = replace(workload, cases={"probe": probe["case"]})
    if probe.get("keep_inputs"):
        workload = replace(workload, clobbered_inputs=())
    state.probe_inputs = probe.get("inputs")
    state.compile = bool(probe.get("compile"))
    state.chunk = int(probe.get("chunk", 0))
    state.first_runs = int(probe.get("runs", 2))
    dists = workload.distributions
    second = Trial("probe", 1, "normal") if state.probe_inputs else Trial("probe", 1000, dists[1 % len(dists)])
    return workload, [Trial("probe", 0, "normal"), second][: int(probe.get("trials", 2))]


@dataclass
class _TrialState:
    """What persists across a correctness check's trials, in the judge."""

    device: str
    candidate: object  # gates.candidate.Candidate
    models: dict = field(default_factory=dict)  # per case: the reference in its dtypes and in float64
    previous_outputs: list = field(default_factory=list)
    kernels: set = field(default_factory=set)  # what the candidate says ran: evidence, never a reason to pass
    functions: set = field(default_factory=set)
    autotune: dict = field(default_factory=dict)
    launches: dict = field(default_factory=dict)  # per named case: what each launch asked for (launch_rows)
    worst_error: float = 0.0
    deterministic: bool = True
    host_ops: tuple = ()  # PyTorch ops the workload allows on the host (HOST_OPS)
    probe_inputs: str | None = None  # a probe whose inputs come from the workload's make_probe_inputs(predicate)
    compile: bool = False  # a probe that runs forward under torch.compile
    chunk: int = 0  # a probe that compares outputs this many elements at a time (0: whole tensors)
    first_runs: int = 2  # runs of each case's first trial
    input_cache: object = None  # Settings.input_cache
    domain_case: dict | None = None  # the extra case drawn from DOMAIN (domain_case)
    # drawn per check, never from the settings: what a program cannot know in advance (the DOMAIN draw, which runs
    # look like a user's call)
    draw: int = field(default_factory=lambda: secrets.randbits(63))
    rng: random.Random = field(init=False)
    user_like_runs: int = 0  # runs made like a user's call (USER_LIKE_SHARE)
    cuda_mapped: dict = field(default_factory=dict)  # CUDA the program used, mapped to the CPU (cuda_on_cpu)
    reference: object = None  # a self-reference workload's reference process (gates.confined), else None
    answers: dict = field(default_factory=dict)  # its answers per (named case, distribution) at seed 0
    trial_seconds: list = field(default_factory=list)  # each trial's wall time, the candidate's runs and the reference

    def __post_init__(self) -> None:
        self.rng = random.Random(self.draw)


def _run_trial(workload, wl_module, trial: Trial, runs: int, state: _TrialState, users=()) -> Finding | None:
    """Send one trial's inputs to the candidate, which runs the program `runs` times (those with a seed in `users`
    like a user's call); then compute the reference (after the runs: in this process, or in the reference process
    of a self-reference workload) and judge each run on the values that came back."""
    import torch

    from klineage.workload import make_case_inputs, on_device

    ref_model, ref64_model = state.models[trial.case]
    case = workload.cases[trial.case]
    made = make_case_inputs(wl_module, case, trial.seed, trial.distribution, state.probe_inputs, state.input_cache)
    originals = [on_device(x, state.device) for x in made]  # nothing in this process writes to them
    tensors, described = pack_values(made, "in")
    restore = [*workload.mutated_inputs, *workload.clobbered_inputs]
    users = [*users, *[0] * runs][:runs]
    state.user_like_runs += sum(1 for u in users if u)
    meta = {"op": "call", "case": trial.case, "runs": runs, "config": trial.config, "inputs": described}
    meta["user_like"] = users
    frame = state.candidate.request({**meta, "restore": restore}, tensors)
    reply = frame.meta
    _take_evidence(reply, state)
    if isinstance(reply.get("failure"), dict):
        return _finding(reply["failure"])
    try:
        done = _runs_back(frame, runs, state.device)
        inputs = _inputs_back(frame, originals, state.device)
    except (WireError, KeyError, TypeError, ValueError) as e:
        return Finding("protocol_error", f"the candidate's answer does not hold what was asked: {e}")
    if trial.seed == 0 and trial.case not in state.launches:
        state.launches[trial.case] = reply.get("launches") or []
    expected, ref64, ref64_inputs = _reference_for(trial, wl_module, ref_model, ref64_model, originals, state)
    for (outputs, findings), user_like in zip(done, users):
        finding = (
            _finding(findings.get("subclass"))
            or _outputs_finding(workload, outputs, ref64, expected, state.previous_outputs, state.chunk)
            or _finding(findings.get("guards"))
            or _mutation_finding(workload, inputs, originals, ref64_inputs, state.chunk)
            or _finding(findings.get("replay"))
            or _finding(findings.get("launch"))
        )
        if finding is not None:
            return replace(finding, detail=f"{finding.detail} (a run like a user's call)") if user_like else finding
    for out, ref in zip(done[-1][0], ref64):
        if isinstance(out, torch.Tensor):
            pieces = _chunks(out, ref, state.chunk) if state.chunk else [(out, ref)]
            state.worst_error = max(state.worst_error, *(relative_error(o, r) for o, r in pieces))
    if runs == 2 and (finding := _disagreement(workload, done[0][0], done[1][0], state)):
        return finding
    state.previous_outputs.append((trial, done[-1][0]))
    return None


def _take_evidence(reply: dict, state: _TrialState) -> None:
    state.kernels.update(str(k) for k in reply.get("kernels") or [])
    state.functions.update(str(f) for f in reply.get("functions") or [])
    state.cuda_mapped.update({str(u): None for u in reply.get("cuda_mapped") or []})
    if isinstance(reply.get("autotune"), dict):
        state.autotune = reply["autotune"]


def _finding(raw) -> Finding | None:
    """A finding the candidate reported (it can only fail a check)."""
    if not isinstance(raw, dict):
        return None
    return Finding(str(raw.get("code", "forward_error"))[:64], str(raw.get("detail", ""))[:2000])


def _runs_back(frame, runs: int, device: str) -> list[tuple[list, dict]]:
    """Each run's outputs built from the frame's bytes, on the judge's device, with the candidate's findings. An
    output that is not a tensor stands in as an object of the type the candidate named (it fails as not_a_tensor);
    one the candidate says is on another device fails as device_mismatch."""
    described = frame.meta["runs"]
    if not isinstance(described, list) or len(described) != runs:
        raise ValueError(f"{runs} runs asked, {len(described) if isinstance(described, list) else 0} answered")
    done = []
    for run in described:
        outputs = []
        for item, where in zip(run["outputs"], run.get("devices") or [""] * len(run["outputs"])):
            if "tensor" in item:
                value = tensor(frame, str(item["tensor"]), device=device)
                outputs.append(value if where in ("", device) else _Elsewhere(value, where))
            else:
                outputs.append(type(str(item.get("type", "object"))[:64], (), {})())
        findings = run.get("findings") if isinstance(run.get("findings"), dict) else {}
        done.append((outputs, findings))
    return done


@dataclass(frozen=True)
class _Elsewhere:
    """An output the candidate computed on another device than the check's."""

    value: object
    device: str


def _inputs_back(frame, originals: list, device: str) -> list:
    """The inputs as the program left them, each with the dtype and shape the judge sent."""
    import torch

    back = []
    for i, original in enumerate(originals):
        if isinstance(original, torch.Tensor):
            dtype = str(original.dtype).removeprefix("torch.")
            back.append(tensor(frame, f"in{i}", dtype, tuple(original.shape), device))
        else:
            back.append(original)
    return back


def _reference_for(trial: Trial, wl_module, ref_model, ref64_model, originals: list, state: _TrialState) -> tuple:
    """`_reference` for a trial; a self-reference's answer for a named case at seed 0 is asked of its reference
    process once. The autotune passes run those trials again, one per further config, on the same inputs, and the
    reference runs its first config every time (gates.candidate), so its answer cannot change; on the CPU every ask
    is an interpreted run of the original program (FlagGems's avg_pool2d: 9 configs, 6.2 s a call)."""
    if state.reference is None or trial.seed != 0:
        return _reference(wl_module, ref_model, ref64_model, originals)
    key = (trial.case, trial.distribution)
    if key not in state.answers:
        state.answers[key] = _reference(wl_module, ref_model, ref64_model, originals)
    return state.answers[key]


def _reference(wl_module, ref_model, ref64_model, originals: list) -> tuple[list, list, list]:
    """The reference's outputs in the inputs' dtypes, in float64, and the float64 inputs (mutated in place by a
    reference with in-place results)."""
    import torch

    with torch.no_grad():
        ref_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in originals]
        expected = flatten_outputs(ref_model(*ref_inputs))
        if getattr(wl_module, "NATIVE_REFERENCE", False) or ref64_model is None:
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


def _outputs_finding(workload, outputs, ref64, expected, previous_outputs, chunk: int = 0) -> Finding | None:
    """Judge output values (built by the judge from the bytes the candidate sent). With `chunk` (a probe past 2^31
    elements), each piece of `chunk` elements is judged on its own: its own scale for the absolute floor and its
    own error norm."""
    import torch

    for i, out in enumerate(outputs):
        if isinstance(out, _Elsewhere):
            return Finding("device_mismatch", f"output {i} is on {out.device}, expected {expected[0].device.type}")
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
