"""Probe cases. For each predicate of a transform's condition vocabulary, the cases that violate it (`make_probes`);
klineage.probing runs them on an accepted step's two forms (parent: the expert's optimized form; child: the
simplified form) and reads the pair of verdicts.

The probes, per predicate (each made by its maker in `PROBE_MAKERS`):

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
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from klineage.mine import Step
from klineage.program import Program
from klineage.transform import dotted, family, node_code, without_kwargs
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
    maker = PROBE_MAKERS.get(predicate)
    probes, why = maker(ProbeSubject(predicate, workload, base, transform, parent, step)) if maker else ([], "")
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


# --- probe makers, by predicate ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeSubject:
    """What a probe maker reads: the predicate, the workload and the case its probes perturb (`base_case`), and the
    step probed: its transform's id, the parent program and the step (an ablation reads the parent's code)."""

    predicate: str
    workload: Workload
    base: dict
    transform: str = ""
    parent: Program | None = None
    step: Step | None = None


ProbeMaker = Callable[[ProbeSubject], tuple[list[dict], str]]  # (probes, why none)
PROBE_MAKERS: dict[str, ProbeMaker] = {}  # predicate -> the maker of the probes that violate it (make_probes)


def probe_maker(*predicates: str) -> Callable[[ProbeMaker], ProbeMaker]:
    """Register the decorated function as the maker of the probes for `predicates`."""

    def register(maker: ProbeMaker) -> ProbeMaker:
        for predicate in predicates:
            PROBE_MAKERS[predicate] = maker
        return maker

    return register


@probe_maker("divisible_by_block")
def _indivisible_sizes(s: ProbeSubject) -> tuple[list[dict], str]:
    probes = []
    odd = _sizes(s.base, lambda v: v + 1 if v % 2 == 0 else v)  # no power-of-two block divides these
    if odd:
        probes.append({"name": "sizes not divisible by any block (even sizes + 1)", "case": odd, "layout": None})
    # divisible by small blocks, not by large ones: catches a flag computed with the wrong block
    coarse = _sizes(s.base, lambda v: v + v // 8 if v % 64 == 0 else v)
    if coarse:
        probes.append(
            {"name": "sizes divisible by small blocks only (64-multiples + 1/8)", "case": coarse, "layout": None}
        )
    return probes, "" if probes else "the tiny case's sizes are already odd and the expert passed it"


@probe_maker("contiguous")
def _strided(s: ProbeSubject) -> tuple[list[dict], str]:
    return [
        {
            "name": "rows padded by 8 elements, vectors at stride 2 (non-contiguous)",
            "case": s.base,
            "layout": "strided",
        }
    ], ""


@probe_maker("aligned_16")
def _misaligned(s: ProbeSubject) -> tuple[list[dict], str]:
    return [{"name": "base shifted by one element (not 16-byte aligned)", "case": s.base, "layout": "misaligned"}], ""


@probe_maker("dtype_fp32", "dtype_fp16", "dtype_bf16")
def _in_dtype(s: ProbeSubject) -> tuple[list[dict], str]:
    wanted = {"dtype_fp32": "float32", "dtype_fp16": "float16", "dtype_bf16": "bfloat16"}[s.predicate]
    if wanted not in _allowed_dtypes(s.workload):
        return [], f"{wanted} is outside the workload's domain"
    if s.base.get("dtype") == wanted:
        return [], f"the check cases already run {wanted}"
    return [
        {
            "name": f"{wanted} inputs (seed 0, then heavy-tailed values)",
            "case": {**s.base, "dtype": wanted},
            "layout": None,
        }
    ], ""


@probe_maker("offsets_below_2_31")
def _past_2_31(s: ProbeSubject) -> tuple[list[dict], str]:
    case, why = overflow_case(s.workload)
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


@probe_maker("torch_compile_launch")
def _compiled(s: ProbeSubject) -> tuple[list[dict], str]:
    return [
        {
            "name": "forward compiled by torch.compile (Inductor launches the kernels)",
            "case": s.base,
            "layout": None,
            "compile": True,
        }
    ], ""


@probe_maker("no_aliasing")
def _aliasing_probes(s: ProbeSubject) -> tuple[list[dict], str]:
    workload, base = s.workload, s.base
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


@probe_maker("idempotent_launch")
def _idempotence_probes(s: ProbeSubject) -> tuple[list[dict], str]:
    base, parent, step = s.base, s.parent, s.step
    repeated = "repeated launches on the same buffers (the first trial run twice, each autotune config benchmarked)"
    if parent is not None and step is not None:
        found = autotune_guard(module_source(parent, step.module), step.site.get("function", ""))
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


def module_source(program: Program, module: str) -> str:
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
    found = autotune_guard(module_source(parent, ablation["module"]), ablation["kernel"])
    if found is None:
        return None
    return parent.with_source(ablation["module"], found[0])  # keeps what was trusted
