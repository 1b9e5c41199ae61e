"""Condition probing. For an accepted step (parent: the expert's optimized form; child: the simplified form) and
each predicate of the transform's condition vocabulary, build a probe case that violates the predicate and run the
correctness gate on both programs:

| parent | child | meaning |
| --- | --- | --- |
| fails | passes | a condition of the skill; the probe is its counterexample (the failure the condition avoids) |
| passes | fails | the optimized form is what handles this case: applying the skill is required here |
| passes | passes | not a condition (the code already guards it, or it does not matter here) |
| fails | fails | outside what either program handles |

Probes are made from the workload's own `make_inputs` with the case changed (sizes perturbed so no block divides
them, another dtype) or with the inputs' layout changed (rows padded: non-contiguous; base shifted by one element:
not 16-byte aligned). Predicates that only a GPU can show (alignment hints, offsets beyond 2^31, torch.compile
launches) are reported as not probed on the CPU, never as "not a condition"."""

from __future__ import annotations

from dataclasses import dataclass

from klineage.config import Settings
from klineage.gates import GateRequest, run_gate
from klineage.mine import Lineage, LineageStore, Step
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.transform import CONDITIONS
from klineage.workload import DTYPES, Workload

GPU_ONLY = {
    "aligned_16": "the interpreter ignores alignment specialization and hints",
    "offsets_below_2_31": "needs tensors of more than 2^31 elements on a GPU",
    "torch_compile_launch": "needs a torch.compile launch on a GPU",
    "arch_sm90": "needs an sm_90 device",
    "shared_memory_fits": "shared memory limits exist only on a GPU",
}


@dataclass(frozen=True)
class ProbeResult:
    predicate: str
    status: str  # condition | required | not_a_condition | outside_domain | not_probed
    probe: dict
    parent: dict  # {"status", "code", "reason"}
    child: dict
    why: str = ""

    def as_condition(self) -> dict:
        evidence = {
            "condition": f"violating it breaks the optimized form ({self.parent['code']}) but not the simple one",
            "required": f"the simple form breaks ({self.child['code']}) where the optimized one passes",
            "not_a_condition": "both forms pass the probe",
            "outside_domain": "both forms fail the probe",
            "not_probed": self.why,
        }[self.status]
        return {"predicate": self.predicate, "description": CONDITIONS[self.predicate], "status": self.status,
                "evidence": evidence, "probe": self.probe}  # fmt: skip


def _perturbed(case: dict) -> dict | None:
    """Sizes that no power-of-two block divides: every even integer size + 1."""
    out = {k: (v + 1 if isinstance(v, int) and not isinstance(v, bool) and k != "dtype" and v % 2 == 0 else v)
           for k, v in case.items()}  # fmt: skip
    return out if out != case else None


def make_probe(predicate: str, workload: Workload, device: str) -> tuple[dict | None, str]:
    """(probe, why-not). A probe is {"name", "case", "layout"}."""
    if device != "cuda" and predicate in GPU_ONLY:
        return None, f"not probed on the CPU: {GPU_ONLY[predicate]}"
    base = workload.cases.get("tiny") or next(iter(workload.cases.values()))
    if predicate == "divisible_by_block":
        case = _perturbed(base)
        if case is None:
            return None, "the tiny case's sizes are already odd: no block divides them, and the expert passed it"
        return {"name": "sizes not divisible by the block", "case": case, "layout": None}, ""
    if predicate == "contiguous":
        return {"name": "rows padded by 8 elements (non-contiguous)", "case": base, "layout": "strided"}, ""
    if predicate == "aligned_16":
        return {"name": "base shifted by one element (not 16-byte aligned)", "case": base, "layout": "misaligned"}, ""
    if predicate.startswith("dtype_"):
        wanted = {"dtype_fp32": "float32", "dtype_fp16": "float16", "dtype_bf16": "bfloat16"}[predicate]
        allowed = workload.domain.get("dtype") or workload.domain.get("dtypes") or list(DTYPES[:3])
        if wanted not in allowed:
            return None, f"{wanted} is outside the workload's domain"
        if base.get("dtype") == wanted:
            return None, f"the check cases already run {wanted}"
        return {"name": f"{wanted} inputs", "case": {**base, "dtype": wanted}, "layout": None}, ""
    return None, "no probe generator for this predicate yet"


def probe_step(
    workload: Workload,
    parent: Program,
    child: Program,
    step: Step,
    conditions: tuple[str, ...],
    settings: Settings,
    device: str,
    sandbox: Sandbox,
) -> list[ProbeResult]:
    results = []
    for predicate in conditions:
        probe, why = make_probe(predicate, workload, device)
        if probe is None:
            results.append(ProbeResult(predicate, "not_probed", {}, {}, {}, why))
            continue
        verdicts = []
        for program in (parent, child):
            request = GateRequest(str(workload.path), program, device, settings, settings.target, probe=probe)
            v = run_gate("correctness", request, sandbox)
            verdicts.append({"status": v.status, "code": v.code, "reason": v.reason[:300]})
        p_ok, c_ok = (v["status"] == "pass" for v in verdicts)
        status = {(False, True): "condition", (True, False): "required", (True, True): "not_a_condition",
                  (False, False): "outside_domain"}[(p_ok, c_ok)]  # fmt: skip
        results.append(ProbeResult(predicate, status, probe, verdicts[0], verdicts[1]))
    return results


def probe_lineage(lineage: Lineage, workload: Workload, settings: Settings, device: str,
                  sandbox: Sandbox | None = None) -> dict[int, list[dict]]:  # fmt: skip
    """Probe every accepted step; results are stored beside the lineage (`probes.json`) and reused on a rerun."""
    import json

    from klineage.transform import TRANSFORMS, load_families

    load_families()
    store = LineageStore(settings.data_dir / "lineages" / lineage.id)
    path = store.root / "probes.json"
    done: dict[str, list[dict]] = json.loads(path.read_text()) if path.is_file() else {}
    own = sandbox is None
    sandbox = sandbox or Sandbox(warm=settings.warm)
    try:
        for step in lineage.accepted:
            if str(step.index) in done or step.transform not in TRANSFORMS:
                continue
            parent = store.load_program(step.parent, lineage.expert)
            child = store.load_program(step.child, lineage.expert)
            results = probe_step(workload, parent, child, step, TRANSFORMS[step.transform].conditions, settings,
                                 device, sandbox)  # fmt: skip
            done[str(step.index)] = [r.as_condition() | {"parent": r.parent, "child": r.child} for r in results]
            path.write_text(json.dumps(done, indent=2))
    finally:
        if own:
            sandbox.close()
    return {int(k): v for k, v in done.items()}
