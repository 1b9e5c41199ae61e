"""Conditions checked forward: does a skill's predicate hold on a workload's whole input domain, on part of it, or
never? And, where it holds on part, the run-time guard that keeps both paths and dispatches at launch.

The domain is the workload's DOMAIN (sizes as [low, high] ranges or lists, dtypes, layouts, flags) plus what the
workload file declares (MUTATED_INPUTS) and what the program's own kernels do (atomics). A predicate the gates
check on every candidate anyway (tolerance, shared memory) is reported as such rather than guessed."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from klineage.transform import launched_kernel, node_code
from klineage.workload import Workload

HOLDS, PARTIAL, VIOLATED, GATED = "holds", "partial", "violated", "gated"

# Predicates that a run-time check on the launch's tensor arguments decides; the helper's source is inserted into
# the program once, the call wraps the launch.
GUARD_HELPERS = {
    "contiguous": (
        "_klineage_all_contiguous",
        "def _klineage_all_contiguous(*args):\n"
        "    return all(a.is_contiguous() for a in args if isinstance(a, torch.Tensor))\n",
    ),
    "aligned_16": (
        "_klineage_all_aligned_16",
        "def _klineage_all_aligned_16(*args):\n"
        "    return all(a.data_ptr() % 16 == 0 and all(s * a.element_size() % 16 == 0 for s in a.stride()[:-1])\n"
        "               for a in args if isinstance(a, torch.Tensor))\n",
    ),
    "offsets_below_2_31": (
        "_klineage_offsets_below_2_31",
        "def _klineage_offsets_below_2_31(*args):\n"
        "    return all(a.numel() < 2**31 for a in args if isinstance(a, torch.Tensor))\n",
    ),
}
for _name, _dtype in (("dtype_fp32", "float32"), ("dtype_fp16", "float16"), ("dtype_bf16", "bfloat16")):
    GUARD_HELPERS[_name] = (
        f"_klineage_all_{_dtype}",
        f"def _klineage_all_{_dtype}(*args):\n"
        f"    return all(a.dtype == torch.{_dtype} for a in args if isinstance(a, torch.Tensor) and "
        "a.is_floating_point())\n",
    )

SIZE_KEYS_IGNORED = {"dtype", "dtypes", "layout", "layouts", "causal", "device"}


@dataclass(frozen=True)
class Decision:
    predicate: str
    verdict: str  # holds | partial | violated | gated
    reason: str

    @property
    def guardable(self) -> bool:
        return self.verdict == PARTIAL and self.predicate in GUARD_HELPERS


def _sizes(domain: dict) -> dict[str, list[int]]:
    out = {}
    for key, value in domain.items():
        if key in SIZE_KEYS_IGNORED or not isinstance(value, list) or not value:
            continue
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            out[key] = value
    return out


def _ranges(domain: dict) -> dict[str, bool]:
    """Size key -> whether the domain allows any value in a range (a 2-element [low, high] list of distinct ints)."""
    return {k: len(v) == 2 and v[0] < v[1] for k, v in _sizes(domain).items()}


def size_in_domain(domain: dict, key: str, value: object) -> bool:
    """Whether a case's size `value` for `key` is one the domain allows: within a [low, high] range, or one of the
    listed values (the rotary embedding's head dims 16..256 are five powers of two, not a range). Keys the domain
    does not size, and values that are not ints, are not judged here."""
    sizes = _sizes(domain)
    if key not in sizes or not isinstance(value, int) or isinstance(value, bool):
        return True
    allowed = sizes[key]
    return allowed[0] <= value <= allowed[1] if _ranges(domain)[key] else value in allowed


def _dtypes(workload: Workload) -> list[str]:
    domain = workload.domain
    found = domain.get("dtype") or domain.get("dtypes")
    if found:
        return list(found)
    return sorted({c["dtype"] for c in workload.cases.values() if "dtype" in c})


def _layouts(workload: Workload) -> list[str]:
    return list(workload.domain.get("layout") or workload.domain.get("layouts") or ["contiguous"])


def accumulates(source: str, kernel: str | None = None) -> bool:
    """Whether a kernel (or any kernel in the source) adds into memory: atomics or a read-modify-write of a pointer."""
    text = source
    if kernel is not None:
        match = re.search(rf"def {re.escape(kernel)}\(.*?(?=\n(?:@|def |class )|\Z)", source, re.S)
        text = match.group(0) if match else source
    return bool(re.search(r"tl\.atomic_(add|max|min|xchg|cas|and|or|xor)\(", text))


# (predicate, workload, source, kernel or None, device, target) -> Decision
Decider = Callable[..., Decision]
# predicate -> the function that decides it on a domain (`decider`); `decide` looks it up
DECIDERS: dict[str, Decider] = {}
# Predicates with no decider of their own, and why: properties of the code that no domain settles, judged by the
# gates on every candidate (`decide` says so).
CODE_PROPERTIES = {
    "torch_compile_launch": "whether a launch from inside torch.compile still works is the candidate's to show",
    "loop_index_not_constexpr": "where the loop index is used is the kernel's code, which the compile gate checks",
    "flag_not_shape": "whether a flag decides a shape is the kernel's code, which the gates check",
    "cross_program_handoff": "whether programs hand work to each other is the kernel's code, checked by correctness",
}


def decider(*predicates: str) -> Callable[[Decider], Decider]:
    """Register a function as the decider of `predicates` (it is told which one it decides)."""

    def register(fn: Decider) -> Decider:
        for predicate in predicates:
            if predicate in DECIDERS:
                raise ValueError(f"predicate {predicate!r} decided twice")
            DECIDERS[predicate] = fn
        return fn

    return register


def decide(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str) -> Decision:
    """Whether `predicate` holds on the workload's domain for this program."""
    found = DECIDERS.get(predicate)
    if found is None:
        return Decision(predicate, GATED, "a property of the code: the gates judge it on the candidate")
    return found(predicate, workload, source, kernel, device, target)


@decider("divisible_by_block")
def _divisible(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    domain = workload.domain
    ranged = [k for k, r in _ranges(domain).items() if r]
    if ranged:
        return Decision(
            predicate,
            PARTIAL,
            f"the domain lets {', '.join(ranged)} take any value in a range, "
            "so some sizes are not multiples of the block",
        )
    sizes = _sizes(domain)
    odd = sorted(k for k, vals in sizes.items() if any(v % 16 for v in vals))
    if odd:
        return Decision(predicate, PARTIAL, f"listed sizes of {', '.join(odd)} are not multiples of 16")
    if not sizes:
        case_sizes = {k: v for c in workload.cases.values() for k, v in c.items() if isinstance(v, int)}
        odd = sorted(k for k, v in case_sizes.items() if v % 16)
        if odd:
            return Decision(predicate, PARTIAL, f"cases have sizes ({', '.join(odd)}) that are not multiples of 16")
    return Decision(predicate, HOLDS, "every size in the domain is a multiple of 16")


@decider("contiguous")
def _contiguous(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    layouts = _layouts(workload)
    if layouts == ["contiguous"]:
        return Decision(predicate, HOLDS, "the domain's layout is contiguous only")
    if "contiguous" in layouts:
        return Decision(predicate, PARTIAL, f"the domain allows layouts {layouts}")
    return Decision(predicate, VIOLATED, f"the domain's inputs are {layouts}, never contiguous")


@decider("aligned_16")
def _aligned(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    layouts = _layouts(workload)
    if any(x in ("misaligned", "offset", "strided") for x in layouts):
        return Decision(predicate, PARTIAL, f"the domain allows layouts {layouts}: views need not be aligned")
    return Decision(predicate, HOLDS, "contiguous fresh tensors: PyTorch allocations are 16-byte aligned")


@decider("offsets_below_2_31")
def _offsets(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    sizes = _sizes(workload.domain)
    largest = 1
    for vals in sizes.values():
        largest *= max(vals)
    if sizes and largest >= 2**31:
        return Decision(
            predicate, PARTIAL, f"the domain's largest sizes multiply to {largest:.3g} elements (at or beyond 2^31)"
        )
    return Decision(predicate, HOLDS, "the domain's sizes stay below 2^31 elements")


DTYPE_PREDICATES = {"dtype_fp32": "float32", "dtype_fp16": "float16", "dtype_bf16": "bfloat16"}


@decider(*DTYPE_PREDICATES)
def _dtype(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    wanted = DTYPE_PREDICATES[predicate]
    dtypes = _dtypes(workload)
    if dtypes == [wanted]:
        return Decision(predicate, HOLDS, f"the domain is {wanted} only")
    if wanted in dtypes:
        return Decision(predicate, PARTIAL, f"the domain's dtypes are {dtypes}")
    return Decision(predicate, VIOLATED, f"the domain's dtypes are {dtypes}, never {wanted}")


@decider("idempotent_launch")
def _idempotent(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    if workload.mutated_inputs:
        inputs = list(workload.mutated_inputs)
        return Decision(predicate, VIOLATED, f"the workload updates inputs {inputs} in place")
    if accumulates(source, kernel):
        where = f"kernel {kernel}" if kernel else "a kernel"
        return Decision(predicate, VIOLATED, f"{where} accumulates with atomics: a repeated launch adds twice")
    return Decision(predicate, HOLDS, "no atomics and no in-place inputs: launching twice writes the same values")


@decider("no_aliasing")
def _no_aliasing(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    if workload.mutated_inputs:
        return Decision(predicate, VIOLATED, f"outputs alias inputs {list(workload.mutated_inputs)}")
    return Decision(predicate, HOLDS, "the workload declares no in-place inputs")


@decider("fully_masked_rows")
def _masked_rows(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    if workload.domain.get("masked_rows") or workload.domain.get("fully_masked_rows"):
        return Decision(predicate, PARTIAL, "the domain allows fully masked rows")
    return Decision(predicate, HOLDS, "the domain declares no fully masked rows")


@decider("arch_sm90")
def _sm90(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    arch = target if device == "cpu" else "the device"
    if device == "cpu":
        number = int(re.sub(r"\D", "", target) or 0)
        ok = number >= 90
    else:
        import torch

        ok = torch.cuda.get_device_capability()[0] >= 9
    return Decision(predicate, HOLDS if ok else VIOLATED, f"{arch} {'is' if ok else 'is not'} sm_90 or newer")


@decider("tolerance", "shared_memory_fits")
def _gated(predicate: str, workload: Workload, source: str, kernel: str | None, device: str, target: str):
    gate = "correctness" if predicate == "tolerance" else "compile"
    return Decision(predicate, GATED, f"the {gate} gate checks it on every candidate")


# --- run-time guards --------------------------------------------------------------------------------------------


class _LaunchGuard(cst.CSTTransformer):
    """Wrap each statement that launches `kernel` in `if helper(tensor args): <optimized> else: <original>`."""

    def __init__(self, kernel: str, helper: str, optimized: dict[str, cst.BaseStatement]):
        self.kernel, self.helper, self.optimized = kernel, helper, optimized
        self.wrapped = 0

    def leave_SimpleStatementLine(self, original, updated):
        launch = _launch_in(updated, self.kernel)
        if launch is None:
            return updated
        fast = self.optimized.get(node_code(updated))
        if fast is None:
            return updated
        args = ", ".join(node_code(a.value) for a in launch.args if a.keyword is None and a.star == "")
        test = cst.parse_expression(f"{self.helper}({args})")
        self.wrapped += 1
        return cst.If(test=test, body=cst.IndentedBlock([fast]), orelse=cst.Else(body=cst.IndentedBlock([updated])))


def _launch_in(stmt: cst.SimpleStatementLine, kernel: str) -> cst.Call | None:
    for node in stmt.body:
        expr = node.value if isinstance(node, (cst.Expr, cst.Assign)) else None
        if isinstance(expr, cst.Call) and launched_kernel(expr, {kernel}):
            return expr
    return None


def guarded(original: str, optimized: str, kernel: str, predicate: str) -> str | None:
    """A program that runs `optimized`'s version of `kernel` (and its launch) when `predicate` holds on the launch's
    tensor arguments and the original otherwise; None when the change cannot be isolated this way."""
    if predicate not in GUARD_HELPERS:
        return None
    helper, helper_source = GUARD_HELPERS[predicate]
    fast_name = f"{kernel}_when_{predicate}"
    try:
        orig_mod, opt_mod = cst.parse_module(original), cst.parse_module(optimized)
    except cst.ParserSyntaxError:
        return None
    orig_defs = {s.name.value: s for s in orig_mod.body if isinstance(s, cst.FunctionDef)}
    opt_defs = {s.name.value: s for s in opt_mod.body if isinstance(s, cst.FunctionDef)}
    if kernel not in orig_defs or kernel not in opt_defs:
        return None
    # Only the kernel and its launch statements may differ; other changes cannot be dispatched per launch.
    if len(orig_mod.body) != len(opt_mod.body):
        return None
    fast_kernel = opt_defs[kernel].with_changes(name=cst.Name(fast_name))
    # the optimized launches, keyed by the original statement they replace (same position in the same function)
    orig_launches, opt_launches = _launch_statements(orig_mod, kernel), _launch_statements(opt_mod, kernel)
    if len(orig_launches) != len(opt_launches) or not orig_launches:
        return None
    replacements = {}
    for o, n in zip(orig_launches, opt_launches):
        renamed = n.visit(_Rename(kernel, fast_name))
        replacements[node_code(o)] = renamed
    body = []
    for stmt in orig_mod.body:
        body.append(stmt)
        if stmt is orig_defs[kernel]:
            body.append(fast_kernel)
    launch_guard = _LaunchGuard(kernel, helper, replacements)
    module = orig_mod.with_changes(body=body).visit(launch_guard)
    if not launch_guard.wrapped:
        return None
    insert_at = max((i + 1 for i, s in enumerate(module.body) if _is_import(s)), default=0)
    helper_def = cst.parse_module(helper_source).body
    return module.with_changes(body=[*module.body[:insert_at], *helper_def, *module.body[insert_at:]]).code


def _is_import(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


class _Collect(cst.CSTVisitor):
    def __init__(self, kernel: str):
        self.kernel, self.found = kernel, []

    def visit_SimpleStatementLine(self, node):
        if _launch_in(node, self.kernel) is not None:
            self.found.append(node)


def _launch_statements(module: cst.Module, kernel: str) -> list[cst.SimpleStatementLine]:
    collector = _Collect(kernel)
    module.visit(collector)
    return collector.found


class _Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def leave_Subscript(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value == self.old:
            return updated.with_changes(value=cst.Name(self.new))
        return updated
