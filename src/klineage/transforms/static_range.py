"""Family 30: compile-time unrolling with `tl.static_range`."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, register
from klineage.transforms._anchored import AnchoredTransform, Module, names_in
from klineage.transforms._kernel_exprs import kernel_nodes
from klineage.transforms.constexpr_flags import CONSTEXPR

STATIC = ("tl.static_range",)


def _loop_iter(module: Module, call: cst.Call) -> bool:
    """`call` is the iterable of a for loop, with no star arguments."""
    parent = module.parents.get(call)
    return isinstance(parent, cst.For) and parent.iter is call and not any(a.star for a in call.args)


def _constexpr_names(fn: cst.FunctionDef | None) -> set[str]:
    if fn is None:
        return set()
    return {
        p.name.value
        for p in fn.params.params
        if p.annotation is not None and dotted(p.annotation.annotation) in CONSTEXPR
    }


def _compile_time_bounds(module: Module, call: cst.Call) -> bool:
    """Every name in the loop's bounds is a constexpr parameter of the kernel (literals aside): `tl.static_range`
    needs a trip count known at compile time. Offered on attention's `range(lo, hi, BLOCK_N)`, whose bounds come
    from the program id, it failed to compile (blind on the H200, RESULTS.md#run-5)."""
    allowed = _constexpr_names(module.enclosing(call))
    return all(names_in(arg.value) <= allowed for arg in call.args)


@register
class StaticRange(AnchoredTransform):
    """Intent: `for i in tl.static_range(0, E, BLOCK)` unrolls a short loop with a compile-time trip count, removing
    loop overhead and letting the index act as a compile-time constant (tuple indexing, constexpr shapes).
    Undo: `range(...)`, an ordinary scf.for loop.

    Conditions: loop_index_not_constexpr: the undo is valid when the loop index is never needed as a compile-time
    constant. That depends on the code, not on inputs, so the compile gate decides it on any input (no probe).

    Failure: with `range`, a loop whose index is used as a constexpr (tuple or shape indexing) fails to compile;
    with `static_range` over a long loop, compile time and code size grow."""

    id = "static_range"
    family = 30
    tag = "M"
    cost = 1
    conditions = ("loop_index_not_constexpr",)
    intent = "tl.static_range unrolls short loops with compile-time trip counts"
    forward_rank = 3

    def expert_anchors(self, module: Module):
        return [
            (call, {"fn": dotted(call.func)})
            for call in kernel_nodes(module, cst.Call)
            if dotted(call.func) in STATIC and _loop_iter(module, call)
        ]

    def plain_anchors(self, module: Module):
        return [
            (call, {})
            for call in kernel_nodes(module, cst.Call)
            if dotted(call.func) == "range"
            and _loop_iter(module, call)
            and all(a.keyword is None for a in call.args)
            and _compile_time_bounds(module, call)
        ]

    def simple(self, node: cst.Call, params: dict) -> cst.Call:
        return node.with_changes(func=cst.Name("range"))

    def optimized(self, node: cst.Call, params: dict) -> cst.Call:
        if params["fn"] not in STATIC:
            raise ValueError(f"static_range: unknown function {params['fn']!r}")
        return node.with_changes(func=cst.parse_expression(params["fn"]))

    def default_params(self) -> dict:
        return {"fn": "tl.static_range"}
