"""Condition probing. For an accepted step (parent: the expert's optimized form; child: the simplified form) and
each predicate of the transform's condition vocabulary, build a probe case that violates the predicate and run the
correctness gate on both programs:

| parent | child | meaning |
| --- | --- | --- |
| fails | passes | a condition of the skill; the probe is its counterexample (the failure the condition avoids) |
| passes | fails | the optimized form is what handles this case: applying the skill is required here |
| passes | passes | not a condition (the code already guards it, or it does not matter here) |
| fails | fails | outside what either program handles |

A verdict that is a harness error, or an out-of-memory, says nothing about either program: that predicate is
reported as not probed, with the reason.

The probes, per predicate (`make_probes`):

- `divisible_by_block`: sizes perturbed so that no block divides them (even sizes + 1), and sizes divisible by
  small blocks only (64-multiples + 1/8: catches a flag computed with the wrong block).
- `contiguous`, `aligned_16`: the inputs' layout changed (rows padded: non-contiguous; base shifted by one element:
  not 16-byte aligned). Alignment only matters to compiled code: GPU only.
- `dtype_*`: the case in that dtype, when the workload's DOMAIN admits it; the second seed draws heavy-tailed
  values, as a check does, so an overflow in a narrow type shows.
- `offsets_below_2_31` (GPU only): the bench case scaled within the DOMAIN until one tensor holds more than 2^31
  elements, in the narrowest dtype the DOMAIN admits (`overflow_case`, a pure function of the workload). Where the
  DOMAIN's largest sizes stay below 2^31 elements, the predicate holds on all of the domain: not probed, and why.
- `fully_masked_rows` (and any predicate the workload lists in PROBES): the workload's own probe cases (PROBES,
  with `make_probe_inputs`); without them, not probed.
- `no_aliasing`: the caller reads its inputs again after the call. A workload that lets the op overwrite inputs
  (CLOBBERED_INPUTS) has that permission withdrawn: every input must come back unchanged. An in-place contract
  (MUTATED_INPUTS) is outside the predicate; a workload with neither already checks it on every call.
- `idempotent_launch`: repeated launches on the same buffers (every check runs a case's first trial twice, and
  autotuning benchmarks each config more than once; the interpreter runs each config twice). When the optimized
  form carries a guard that makes its repeated launches safe (autotune's `reset_to_zero` / `restore_value`), the
  probe is an ablation: the optimized form without that guard, against the simple form. A failure then shows
  that the kernel is not idempotent and that the guard is what makes the optimization valid; the condition's
  evidence says exactly that.
- `torch_compile_launch` (GPU only): forward compiled by torch.compile (Inductor's launch path).

Predicates that only a GPU can show are reported as not probed on the CPU, never as "not a condition". Neither is a
family whose rewrite changes only what the Triton interpreter ignores (hints, cache modifiers, launch knobs): on
the CPU its parent and child run identically, so any probe would pass both vacuously (`Transform.interpreter_blind`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from klineage.config import Settings, device_kind, write_whole
from klineage.gates import GateRequest, run_gate
from klineage.mine import Lineage, LineageStore, Step
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.transform import CONDITIONS, dotted, family, node_code, without_kwargs
from klineage.workload import DTYPES, Workload

GPU_ONLY = {
    "aligned_16": "the interpreter ignores alignment specialization and hints",
    "offsets_below_2_31": "needs tensors of more than 2^31 elements on a GPU",
    "torch_compile_launch": "needs a torch.compile launch on a GPU",
    "arch_sm90": "needs an sm_90 device",
    "shared_memory_fits": "shared memory limits exist only on a GPU",
}

OFFSET_LIMIT = 2**31
OVERFLOW_TARGET = OFFSET_LIMIT + OFFSET_LIMIT // 16  # the largest offset clearly past 2^31, not just at it
OVERFLOW_MAX_BYTES = 24 * 2**30  # one probe's input and output tensors (the float64 reference needs ~4x more)
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
AUTOTUNE_GUARDS = ("reset_to_zero", "restore_value")  # autotune arguments that make repeated launches safe


@dataclass(frozen=True)
class ProbeResult:
    predicate: str
    status: str  # condition | required | not_a_condition | outside_domain | not_probed
    probe: dict
    parent: dict  # {"status", "code", "reason"}
    child: dict
    why: str = ""

    def as_condition(self) -> dict:
        guard = self.probe.get("ablation", {}).get("removed")
        if guard and self.status == "condition":
            evidence = (
                f"ablation: the optimized form without `{guard}` fails ({self.parent['code']}) on repeated "
                f"launches where the simple form passes: the kernel is not idempotent, so the optimization "
                f"is valid only with `{guard}` (or on an idempotent kernel)"
            )
        elif guard and self.status == "not_a_condition":
            evidence = f"ablation: the optimized form passes even without `{guard}`: repeated launches are harmless"
        elif self.status == "condition":
            evidence = f"violating it breaks the optimized form ({self.parent['code']}) but not the simple one"
        elif self.status == "required":
            evidence = f"the simple form breaks ({self.child['code']}) where the optimized one passes"
        elif self.status == "not_a_condition":
            evidence = "both forms pass the probe"
        elif self.status == "outside_domain":
            evidence = "both forms fail the probe"
        else:
            evidence = self.why
        return {
            "predicate": self.predicate,
            "description": CONDITIONS[self.predicate],
            "status": self.status,
            "evidence": evidence,
            "probe": self.probe,
        }


def _sizes(case: dict, change) -> dict | None:
    out = {k: (change(v) if _is_size(v) else v) for k, v in case.items()}
    return out if out != case else None


def _is_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _allowed_dtypes(workload: Workload) -> list[str]:
    return list(workload.domain.get("dtype") or workload.domain.get("dtypes") or DTYPES[:3])


def _interpreter_blind(transform: str) -> str:
    """Why the Triton interpreter cannot tell the family's two forms apart ("" where it can, or for no family)."""
    found = family(transform) if transform else None
    return found.interpreter_blind if found is not None else ""


def base_case(workload: Workload) -> dict:
    """The case probes perturb: the tiny one (the interpreter runs it in seconds)."""
    return workload.cases.get("tiny") or next(iter(workload.cases.values()))


def make_probes(
    predicate: str,
    workload: Workload,
    device: str,
    transform: str = "",
    parent: Program | None = None,
    step: Step | None = None,
) -> tuple[list[dict], str]:
    """(probes, why none). A probe is {"name", "case", "layout"} plus what the gate honours (see
    `GateRequest.probe`) and, for an ablation, {"ablation": {...}} (the parent to run instead, see `ablated`).
    A predicate may need several probes; the workload's own (PROBES) come first."""
    if device != "cuda" and predicate in GPU_ONLY:
        return [], f"not probed on the CPU: {GPU_ONLY[predicate]}"
    # a family whose simplification changes only what the Triton interpreter ignores (Transform.interpreter_blind)
    if device != "cuda" and (blind := _interpreter_blind(transform)):
        return [], f"not probed on the CPU: {blind}, so both forms run identically there; a GPU decides it"
    base = base_case(workload)
    own = [
        {
            "name": f"the workload's {predicate} probe ({_describe(overrides) or 'its own inputs'})",
            "case": {**base, **overrides},
            "layout": None,
            "inputs": predicate,
        }
        for overrides in workload.probes.get(predicate, [])
    ]
    probes, why = _generic_probes(predicate, workload, device, base, transform, parent, step)
    probes = own + probes
    if probes:
        return probes, ""
    if predicate == "fully_masked_rows" and not why:
        why = (
            "the workload makes no case with a fully masked row or tile: declare PROBES['fully_masked_rows'] "
            "(case overrides) and, where case keys cannot say it, make_probe_inputs(predicate, case, seed)"
        )
    return [], why or "no probe generator for this predicate yet"


def _describe(overrides: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items())


def _generic_probes(predicate, workload, device, base, transform, parent, step) -> tuple[list[dict], str]:
    if predicate == "divisible_by_block":
        probes = []
        odd = _sizes(base, lambda v: v + 1 if v % 2 == 0 else v)  # no power-of-two block divides these
        if odd:
            probes.append({"name": "sizes not divisible by any block (even sizes + 1)", "case": odd, "layout": None})
        # divisible by small blocks, not by large ones: catches a flag computed with the wrong block
        coarse = _sizes(base, lambda v: v + v // 8 if v % 64 == 0 else v)
        if coarse:
            probes.append(
                {"name": "sizes divisible by small blocks only (64-multiples + 1/8)", "case": coarse, "layout": None}
            )
        return probes, "" if probes else "the tiny case's sizes are already odd and the expert passed it"
    if predicate == "contiguous":
        return [
            {
                "name": "rows padded by 8 elements, vectors at stride 2 (non-contiguous)",
                "case": base,
                "layout": "strided",
            }
        ], ""
    if predicate == "aligned_16":
        return [{"name": "base shifted by one element (not 16-byte aligned)", "case": base, "layout": "misaligned"}], ""
    if predicate.startswith("dtype_"):
        wanted = {"dtype_fp32": "float32", "dtype_fp16": "float16", "dtype_bf16": "bfloat16"}[predicate]
        if wanted not in _allowed_dtypes(workload):
            return [], f"{wanted} is outside the workload's domain"
        if base.get("dtype") == wanted:
            return [], f"the check cases already run {wanted}"
        return [
            {
                "name": f"{wanted} inputs (seed 0, then heavy-tailed values)",
                "case": {**base, "dtype": wanted},
                "layout": None,
            }
        ], ""
    if predicate == "offsets_below_2_31":
        case, why = overflow_case(workload)
        if case is None:
            return [], why
        # one seed, one run, outputs compared in pieces: float64 copies of whole outputs would not fit the device
        return [
            {
                "name": f"largest tensor past 2^31 elements ({why})",
                "case": case,
                "layout": None,
                "trials": 1,
                "runs": 1,
                "chunk": 2**27,
            }
        ], ""
    if predicate == "no_aliasing":
        return _aliasing_probes(workload, base)
    if predicate == "idempotent_launch":
        return _idempotence_probes(base, transform, parent, step)
    if predicate == "torch_compile_launch":
        return [
            {
                "name": "forward compiled by torch.compile (Inductor launches the kernels)",
                "case": base,
                "layout": None,
                "compile": True,
            }
        ], ""
    return [], ""


def _aliasing_probes(workload: Workload, base: dict) -> tuple[list[dict], str]:
    if workload.clobbered_inputs:
        which = ", ".join(str(i) for i in workload.clobbered_inputs)
        return [
            {
                "name": f"the caller reads input {which} again after the call (CLOBBERED_INPUTS withdrawn)",
                "case": base,
                "layout": None,
                "keep_inputs": True,
            }
        ], ""
    if workload.mutated_inputs:
        return [], (
            "the op writes its inputs in place by contract (MUTATED_INPUTS): a caller that reads them again "
            "is outside the workload"
        )
    return [], (
        "the workload lets no input be overwritten, so every check already requires the inputs back "
        "unchanged; only the program's own buffers can alias, and the check covers them"
    )


def _idempotence_probes(base: dict, transform: str, parent: Program | None, step: Step | None):
    repeated = "repeated launches on the same buffers (the first trial run twice, each autotune config benchmarked)"
    if parent is not None and step is not None:
        found = autotune_guard(_module_source(parent, step.module), step.site.get("function", ""))
        if found is not None:
            removed = found[1]
            ablation = {
                "kind": "autotune_guard",
                "module": step.module,
                "kernel": step.site["function"],
                "removed": removed,
            }
            return [
                {
                    "name": f"{repeated}, the optimized form without `{removed}` (ablation)",
                    "case": base,
                    "layout": None,
                    "ablation": ablation,
                }
            ], ""
    return [{"name": repeated, "case": base, "layout": None}], ""


# --- offsets beyond 2^31 ------------------------------------------------------------------------------------------


def overflow_case(workload: Workload, module=None) -> tuple[dict | None, str]:
    """A case whose largest tensor (an input, or an output of the reference) holds more than 2^31 elements, within
    the workload's DOMAIN: (case, description) or (None, why there is none). Pure: it runs the workload's
    make_inputs and reference on the tiny case and on copies with one size doubled (CPU, seconds), reads off how
    each tensor's element count grows with each size, then scales the bench case. The dtype is the narrowest the
    DOMAIN admits (offsets count elements; bytes only cost memory)."""
    from klineage.workload import import_file

    module = module or import_file(workload.path, "klineage_probe_workload")
    small = base_case(workload)
    keys = [k for k, v in small.items() if _is_size(v) and v > 0]
    counts = _tensor_counts(module, small)
    if counts is None:
        return None, "the workload's inputs could not be made for its tiny case"
    exponents: dict[str, list[float]] = {}
    for key in keys:
        doubled = _tensor_counts(module, {**small, key: small[key] * 2})
        if doubled is not None and len(doubled) == len(counts):
            exponents[key] = [round(math.log2(d / c), 6) if c else 0.0 for d, c in zip(doubled, counts)]
    big = dict(workload.cases.get("bench") or max(workload.cases.values(), key=_volume))
    unknown = [k for k in keys if k in big and big[k] != small[k] and k not in exponents]
    if unknown:
        return None, f"cannot tell how the tensors grow with {', '.join(unknown)} (doubling it failed)"
    if "dtype" in big:
        dtypes = [d for d in _allowed_dtypes(workload) if d in ELEMENT_BYTES] or [big["dtype"]]
        big["dtype"] = min(dtypes, key=lambda d: ELEMENT_BYTES[d])

    def sizes(case: dict) -> list[float]:
        out = []
        for t, count in enumerate(counts):
            scale = 1.0
            for key, e in exponents.items():
                if e[t] and key in case:
                    scale *= (case[key] / small[key]) ** e[t]
            out.append(count * scale)
        return out

    best = None
    for t in range(len(counts)):  # grow the sizes of one tensor at a time; keep the smallest case that overflows
        case = dict(big)
        growable = sorted(
            (k for k in exponents if exponents[k][t] > 0 and k in case),
            key=lambda k: -_ceiling(workload, k, case[k]) / case[k],
        )
        for key in growable:
            need = sizes(case)[t]
            if need >= OVERFLOW_TARGET:
                break
            wanted = math.ceil(case[key] * (OVERFLOW_TARGET / need) ** (1 / exponents[key][t]) - 1e-6)
            case[key] = _allowed_value(workload, key, wanted)
        if sizes(case)[t] >= OVERFLOW_TARGET and (best is None or sum(sizes(case)) < sum(sizes(best))):
            best = case
    if best is None:
        most = dict(big)
        for key in exponents:
            if key in most:
                most[key] = _ceiling(workload, key, most[key])
        largest = max(sizes(most))
        return None, (
            f"holds on all of the DOMAIN: its largest sizes give at most {largest:,.0f} elements in one "
            f"tensor (2^31 = {OFFSET_LIMIT:,}), so offsets always fit int32"
        )
    total = sum(sizes(best)) * ELEMENT_BYTES.get(best.get("dtype", "float32"), 4)
    if total > OVERFLOW_MAX_BYTES:
        return None, f"a case past 2^31 elements needs ~{total / 2**30:.0f} GiB of tensors, more than a probe may take"
    described = ", ".join(f"{k}={best[k]}" for k in best if best[k] != big.get(k) or k == "dtype")
    return best, f"{described}: {max(sizes(best)):,.0f} elements"


def _volume(case: dict) -> int:
    return math.prod(v for v in case.values() if _is_size(v) and v > 0)


def _ceiling(workload: Workload, key: str, current: int) -> int:
    """The largest value of a size the DOMAIN admits ([lo, hi] bounds, or a list of allowed values)."""
    allowed = workload.domain.get(key)
    if isinstance(allowed, (list, tuple)) and allowed and all(_is_size(v) for v in allowed):
        return max(max(allowed), current) if len(allowed) != 2 else max(allowed[1], current)
    return max(current, 2**40)  # unbounded


def _allowed_value(workload: Workload, key: str, wanted: int) -> int:
    allowed = workload.domain.get(key)
    if isinstance(allowed, (list, tuple)) and len(allowed) > 2 and all(_is_size(v) for v in allowed):
        above = [v for v in sorted(allowed) if v >= wanted]
        return above[0] if above else max(allowed)
    return min(wanted, _ceiling(workload, key, 0))


def _tensor_counts(module, case: dict) -> list[int] | None:
    """Element counts of the case's input tensors, then of the reference's outputs (CPU)."""
    import torch

    from klineage.workload import make_case_init_inputs, make_case_inputs

    try:
        inputs = make_case_inputs(module, case, 0)
        torch.manual_seed(42)
        model = module.Model(*make_case_init_inputs(module, case))
        with torch.no_grad():
            outputs = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    except Exception:
        return None
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [x.numel() for x in [*inputs, *outputs] if isinstance(x, torch.Tensor)]


# --- ablation: the optimized form without its guard --------------------------------------------------------------


def _module_source(program: Program, module: str) -> str:
    return program.source if module == "program" else program.modules.get(module, "")


def autotune_guard(source: str, kernel: str) -> tuple[str, str] | None:
    """`source` with reset_to_zero / restore_value removed from the @triton.autotune decorator of `kernel`:
    (new source, what was removed, as source text), or None when that decorator has neither."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None
    for stmt in module.body:
        if not isinstance(stmt, cst.FunctionDef) or stmt.name.value != kernel:
            continue
        for decorator in stmt.decorators:
            call = decorator.decorator
            if not isinstance(call, cst.Call) or dotted(call.func) not in ("triton.autotune", "autotune"):
                continue
            found = [a for a in call.args if a.keyword is not None and a.keyword.value in AUTOTUNE_GUARDS]
            if not found:
                return None
            removed = ", ".join(f"{a.keyword.value}={node_code(a.value)}" for a in found)
            stripped = decorator.with_changes(decorator=without_kwargs(call, set(AUTOTUNE_GUARDS)))
            return module.deep_replace(decorator, stripped).code, removed
    return None


def ablated(parent: Program, ablation: dict) -> Program | None:
    """The parent program an ablation probe runs instead of the parent."""
    if ablation.get("kind") != "autotune_guard":
        return None
    found = autotune_guard(_module_source(parent, ablation["module"]), ablation["kernel"])
    if found is None:
        return None
    if ablation["module"] == "program":
        return Program(parent.name, found[0], parent.modules, parent.path)
    return parent.with_module(ablation["module"], found[0])


# --- running probes -----------------------------------------------------------------------------------------------

RANK = ["condition", "required", "outside_domain", "not_a_condition", "not_probed"]


def classify(parent: dict, child: dict) -> tuple[str, str]:
    """(status, why) from the two verdicts. A harness error or an out-of-memory tells nothing about the programs."""
    for name, v in (("optimized", parent), ("simple", child)):
        if v["status"] == "error" or v["code"] == "oom":
            return "not_probed", f"the probe did not run to a verdict on the {name} form ({v['code']}: {v['reason']})"
    p_ok, c_ok = parent["status"] == "pass", child["status"] == "pass"
    return {
        (False, True): "condition",
        (True, False): "required",
        (True, True): "not_a_condition",
        (False, False): "outside_domain",
    }[(p_ok, c_ok)], ""


def in_expert_context(expert: Program, step: Step) -> Program | None:
    """The expert with only this step's simplification applied (the same family, function and code), or None."""
    from klineage.transform import TRANSFORMS

    cls = TRANSFORMS.get(step.transform)
    source = _module_source(expert, step.module)
    if cls is None or not source:
        return None
    transform = cls()
    try:
        for site in transform.sites(source):
            if site.function == step.site["function"] and site.before == step.site["before"]:
                simplified = transform.simplify(source, site)
                if step.module == "program":
                    return Program(expert.name, simplified, expert.modules, expert.path)
                return expert.with_module(step.module, simplified)
    except Exception:
        return None
    return None


def _run_probe(predicate, probe, parent, child, workload, settings, device, sandbox) -> ProbeResult:
    if "ablation" in probe:
        parent = ablated(parent, probe["ablation"])
        if parent is None:
            return ProbeResult(predicate, "not_probed", probe, {}, {}, "the ablation did not apply")
    verdicts = []
    for program in (parent, child):
        request = GateRequest(str(workload.path), program, device, settings, settings.target, probe=probe)
        v = run_gate("correctness", request, sandbox)
        verdicts.append({"status": v.status, "code": v.code, "reason": v.reason[:300]})
    status, why = classify(*verdicts)
    return ProbeResult(predicate, status, probe, verdicts[0], verdicts[1], why)


def probe_step(
    workload: Workload,
    parent: Program,
    child: Program,
    step: Step,
    conditions: tuple[str, ...],
    settings: Settings,
    device: str,
    sandbox: Sandbox,
    expert: Program | None = None,
) -> list[ProbeResult]:
    """Probe one accepted step. Where both forms fail a probe, the failure may come from an earlier step of the
    lineage (both carry every earlier simplification): with `expert`, that probe is run again on the expert
    against the expert with only this step undone, and that outcome is the one recorded (marked "in the expert")."""
    results = []
    for predicate in conditions:
        probes, why = make_probes(predicate, workload, device, step.transform, parent, step)
        if not probes:
            results.append(ProbeResult(predicate, "not_probed", {}, {}, {}, why))
            continue
        outcomes = []
        for probe in probes:
            outcome = _run_probe(predicate, probe, parent, child, workload, settings, device, sandbox)
            if outcome.status == "outside_domain" and expert is not None and expert.hash != parent.hash:
                alone = in_expert_context(expert, step)
                if alone is not None:
                    again = {**probe, "name": f"{probe['name']}, in the expert (earlier steps not undone)"}
                    outcome = _run_probe(predicate, again, expert, alone, workload, settings, device, sandbox)
            outcomes.append(outcome)
        # the most telling outcome wins: one counterexample makes it a condition
        results.append(min(outcomes, key=lambda r: RANK.index(r.status)))
    return results


def probes_path(folder: Path, lineage: Lineage, device: str) -> Path:
    """Where a lineage's probes on `device` are kept: `probes.json` for the kind of device it was walked on, beside
    it `probes-<device>.json` for the other. A walk made on the CPU leaves the GPU-only conditions not probed; a GPU
    probes those again (run 15 reused the CPU's file whole, and the conditions the CPU had left unprobed stayed so)
    and takes the CPU's answers for the rest (probe_lineage)."""
    return folder / ("probes.json" if device == device_kind(lineage.device) else f"probes-{device}.json")


def read_probes(path: Path) -> dict[int, list[dict]]:
    """A probes file by step index: empty when there is none, or when it is unreadable (one cut by a kill before
    writes went through config.write_whole): its steps are probed again."""
    import json

    try:
        return {int(k): v for k, v in json.loads(path.read_text()).items()}
    except (FileNotFoundError, ValueError, AttributeError):  # none, not JSON, or not a mapping of step indices
        return {}


def write_probes(path: Path, probes: dict[int, list[dict]]) -> None:
    """A probes file by step index, written whole (a kill never leaves half of one)."""
    import json

    write_whole(path, json.dumps({str(k): v for k, v in sorted(probes.items())}, indent=2))


def stored_probes(lineage: Lineage, settings: Settings, device: str) -> dict[int, list[dict]]:
    """The probes kept for a lineage on `device` (those that finished, where a run was stopped), over the probes of
    the device it was walked on for the steps `device` has not probed yet."""
    folder = settings.data_dir / "lineages" / lineage.id
    found: dict[int, list[dict]] = {}
    for path in dict.fromkeys(
        [probes_path(folder, lineage, device_kind(lineage.device)), probes_path(folder, lineage, device)]
    ):
        found.update(read_probes(path))
    return found


def probe_lineage(
    lineage: Lineage, workload: Workload, settings: Settings, device: str, sandbox: Sandbox | None = None
) -> dict[int, list[dict]]:
    """Probe every accepted step; results are stored beside the lineage (`probes.json`) after each step and reused on
    a rerun. Steps are independent, so `settings.probe_workers` of them run side by side, each worker with a sandbox
    of its own (the given one among them).

    A walk made on the CPU and probed on a GPU: the predicates the CPU answered (a counterexample, or none that
    breaks either form) are taken from the walk's probes, marked so, and the GPU probes only those the interpreter
    cannot decide (`not_probed` there: alignment, hints, cache modifiers, what the interpreter ignores). Each probe
    is a pair of full checks: in run 16, four experts that had finished their timing on one H200 were still being
    probed again in full at the six-minute limit (matmul had not finished one step)."""
    import queue
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from klineage.transform import TRANSFORMS, load_families

    load_families()
    store = LineageStore(settings.data_dir / "lineages" / lineage.id)
    path = probes_path(store.root, lineage, device)
    done = read_probes(path)
    todo = [s for s in lineage.accepted if s.index not in done and s.transform in TRANSFORMS]
    walk_path = probes_path(store.root, lineage, device_kind(lineage.device))
    walked = read_probes(walk_path) if walk_path != path else {}
    expert = store.load_program(lineage.expert_hash, lineage.expert)
    workers = max(1, min(settings.probe_workers, len(todo)))
    # a sandbox is used by one job at a time: each probe borrows one (servers start on first use)
    sandboxes = [sandbox or Sandbox(warm=settings.warm)] + [Sandbox(warm=settings.warm) for _ in range(workers - 1)]
    free: queue.SimpleQueue[Sandbox] = queue.SimpleQueue()
    for sb in sandboxes:
        free.put(sb)
    lock = threading.Lock()

    def probe_one(step) -> None:
        parent = store.load_program(step.parent, lineage.expert)
        child = store.load_program(step.child, lineage.expert)
        answered = {c["predicate"]: c for c in walked.get(step.index, []) if c["status"] != "not_probed"}
        conditions = TRANSFORMS[step.transform].conditions
        borrowed = free.get()
        try:
            results = probe_step(
                workload,
                parent,
                child,
                step,
                tuple(c for c in conditions if c not in answered),
                settings,
                device,
                borrowed,
                expert,
            )
        finally:
            free.put(borrowed)
        probed = {r.predicate: r.as_condition() | {"parent": r.parent, "child": r.child} for r in results}
        reused = {
            name: {**c, "evidence": f"{c['evidence']} (probed on {lineage.device}, where the walk ran)"}
            for name, c in answered.items()
        }
        with lock:
            done[step.index] = [probed.get(name) or reused[name] for name in conditions]
            write_probes(path, done)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(probe_one, step) for step in todo]:
                future.result()  # a step that raised stops the run, as before; what finished is on disk
    finally:
        for sb in sandboxes:
            if sb is not sandbox:
                sb.close()
    return dict(done)
