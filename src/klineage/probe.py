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
        if self.status == "condition":
            evidence = f"violating it breaks the optimized form ({self.parent['code']}) but not the simple one"
        elif self.status == "required":
            evidence = f"the simple form breaks ({self.child['code']}) where the optimized one passes"
        elif self.status == "not_a_condition":
            evidence = "both forms pass the probe"
        elif self.status == "outside_domain":
            evidence = "both forms fail the probe"
        else:
            evidence = self.why
        return {"predicate": self.predicate, "description": CONDITIONS[self.predicate], "status": self.status,
                "evidence": evidence, "probe": self.probe}  # fmt: skip


def _sizes(case: dict, change) -> dict | None:
    out = {k: (change(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in case.items()}
    return out if out != case else None


def make_probes(predicate: str, workload: Workload, device: str) -> tuple[list[dict], str]:
    """(probes, why none). A probe is {"name", "case", "layout"}; a predicate may need several."""
    if device != "cuda" and predicate in GPU_ONLY:
        return [], f"not probed on the CPU: {GPU_ONLY[predicate]}"
    base = workload.cases.get("tiny") or next(iter(workload.cases.values()))
    if predicate == "divisible_by_block":
        probes = []
        odd = _sizes(base, lambda v: v + 1 if v % 2 == 0 else v)  # no power-of-two block divides these
        if odd:
            probes.append({"name": "sizes not divisible by any block (even sizes + 1)", "case": odd, "layout": None})
        # divisible by small blocks, not by large ones: catches a flag computed with the wrong block
        coarse = _sizes(base, lambda v: v + v // 8 if v % 64 == 0 else v)
        if coarse:
            probes.append({"name": "sizes divisible by small blocks only (64-multiples + 1/8)", "case": coarse,
                           "layout": None})  # fmt: skip
        return probes, "" if probes else "the tiny case's sizes are already odd and the expert passed it"
    if predicate == "contiguous":
        return [{"name": "rows padded by 8 elements, vectors at stride 2 (non-contiguous)", "case": base,
                 "layout": "strided"}], ""  # fmt: skip
    if predicate == "aligned_16":
        return [{"name": "base shifted by one element (not 16-byte aligned)", "case": base, "layout": "misaligned"}], ""
    if predicate.startswith("dtype_"):
        wanted = {"dtype_fp32": "float32", "dtype_fp16": "float16", "dtype_bf16": "bfloat16"}[predicate]
        allowed = workload.domain.get("dtype") or workload.domain.get("dtypes") or list(DTYPES[:3])
        if wanted not in allowed:
            return [], f"{wanted} is outside the workload's domain"
        if base.get("dtype") == wanted:
            return [], f"the check cases already run {wanted}"
        return [{"name": f"{wanted} inputs", "case": {**base, "dtype": wanted}, "layout": None}], ""
    return [], "no probe generator for this predicate yet"


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
        probes, why = make_probes(predicate, workload, device)
        if not probes:
            results.append(ProbeResult(predicate, "not_probed", {}, {}, {}, why))
            continue
        outcomes = []
        for probe in probes:
            verdicts = []
            for program in (parent, child):
                request = GateRequest(str(workload.path), program, device, settings, settings.target, probe=probe)
                v = run_gate("correctness", request, sandbox)
                verdicts.append({"status": v.status, "code": v.code, "reason": v.reason[:300]})
            p_ok, c_ok = (v["status"] == "pass" for v in verdicts)
            status = {(False, True): "condition", (True, False): "required", (True, True): "not_a_condition",
                      (False, False): "outside_domain"}[(p_ok, c_ok)]  # fmt: skip
            outcomes.append(ProbeResult(predicate, status, probe, verdicts[0], verdicts[1]))
        # the most telling outcome wins: one counterexample makes it a condition
        rank = ["condition", "required", "outside_domain", "not_a_condition"]
        results.append(min(outcomes, key=lambda r: rank.index(r.status)))
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
