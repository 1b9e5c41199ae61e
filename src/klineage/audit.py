"""`audit`: is a workload's check strong enough to mine on? A workload whose correctness check passes zeros, a
constant, one of its inputs or the mean of the reference output would let mining accept wrong simplifications, so
it is flagged before anything else runs on it (KernelBench #165: an all-zero output passed 4 of 60 problems)."""

from __future__ import annotations

from dataclasses import dataclass, field

from klineage.compare import compare_output, flatten_outputs
from klineage.config import Settings
from klineage.sandbox import Job, Sandbox
from klineage.workload import Workload


@dataclass(frozen=True)
class AuditReport:
    workload: str
    trials: int
    passing_fakes: tuple[str, ...]  # fakes that passed every trial: each one is a hole in the check
    tried: tuple[str, ...] = ()
    error: str = ""
    notes: dict = field(default_factory=dict)

    @property
    def weak(self) -> bool:
        return bool(self.passing_fakes) or bool(self.error)


def fakes_for(inputs: list, expected) -> dict:
    """Outputs a cheat could return without computing anything."""
    import torch

    out = {
        "zeros": torch.zeros_like(expected),
        "constant": torch.full_like(expected, 1.0) if expected.is_floating_point() else torch.ones_like(expected),
    }
    if expected.is_floating_point() and expected.numel() > 1:  # a scalar's mean is the answer itself
        out["mean output"] = torch.full_like(expected, float(expected.double().mean()))
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel() == expected.numel():
            out[f"input {i}"] = x.reshape(expected.shape).to(expected.dtype).clone()
    return out


def audit_job(payload: tuple[str, Settings]) -> AuditReport:
    import copy

    import torch

    from klineage.gates.correctness import plan_trials
    from klineage.workload import import_file, make_case_init_inputs, make_case_inputs, workload_from_module

    path, settings = payload
    from pathlib import Path

    module = import_file(Path(path), "klineage_workload")
    workload = workload_from_module(Path(path), Path(path).read_text(), module)
    trials = plan_trials(workload, "cpu", settings.seeds)
    survivors: dict[str, bool] = {}
    models = {}
    for trial in trials:
        case = workload.cases[trial.case]
        if trial.case not in models:
            torch.manual_seed(42)
            model = module.Model(*make_case_init_inputs(module, case))
            models[trial.case] = (model, copy.deepcopy(model).double())
        model, model64 = models[trial.case]
        inputs = make_case_inputs(module, case, trial.seed, trial.distribution, cache_dir=settings.inputs_dir)
        with torch.no_grad():
            expected = flatten_outputs(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
            inputs64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            ref64 = flatten_outputs(model64(*inputs64))
        for i in workload.mutated_inputs:  # an in-place result is an output too: leaving it untouched must fail
            exp, ref, before = inputs[i].clone(), inputs64[i], inputs[i]
            tol = workload.tolerance(str(exp.dtype).removeprefix("torch."))
            for name, fake in {"unchanged": before, "zeros": torch.zeros_like(before)}.items():
                label = f"mutated input {i}: {name}"
                ok = compare_output(fake, ref, exp, tol, label) is None
                survivors[label] = survivors.get(label, True) and ok
        for i, (exp, ref) in enumerate(zip(expected, ref64)):
            tol = workload.tolerance(str(exp.dtype).removeprefix("torch."))
            for name, fake in fakes_for(inputs, exp).items():
                label = f"output {i}: {name}"
                ok = compare_output(fake, ref, exp, tol, label) is None
                survivors[label] = survivors.get(label, True) and ok
    passing = tuple(sorted(k for k, v in survivors.items() if v))
    return AuditReport(workload.name, len(trials), passing, tuple(sorted(survivors)))


def audit(workload: Workload, settings: Settings, sandbox: Sandbox | None = None) -> AuditReport:
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=False)
    try:
        result = sandbox.run(
            Job("klineage.audit:audit_job", (str(workload.path), settings), timeout_s=settings.timeout_s)
        )
    finally:
        if own:
            sandbox.close()
    if not result.ok:
        return AuditReport(workload.name, 0, (), error=f"{result.kind}: {result.error}")
    return result.value
