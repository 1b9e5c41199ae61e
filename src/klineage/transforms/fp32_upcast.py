"""Family 24: fp32 upcast of loaded values (`tl.load(...).to(tl.float32)`, `x = x.to(tl.float32)`)."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, register
from klineage.transforms._anchored import AnchoredTransform, Module
from klineage.transforms._kernel_exprs import (
    StatementSites,
    cast_of,
    is_cast_receiver,
    is_value_use,
    kernel_nodes,
    make_cast,
)

FP32 = "tl.float32"


def _is_load(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and dotted(node.func) == "tl.load"


def loaded_names(fn: cst.FunctionDef) -> set[str]:
    """Names in a kernel that only ever hold loaded values: every assignment to them is `tl.load(...)`, a cast of
    such a load, the name itself, or a cast of the name itself; at least one is a load. Parameters, loop targets,
    augmented and tuple assignments disqualify a name."""
    good: dict[str, bool] = {}
    bad = {p.name.value for p in fn.params.params}

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if not isinstance(t.target, cst.Name):
                    for n in _names(t.target):
                        bad.add(n)
                    continue
                name, value = t.target.value, node.value
                receiver = (
                    value.func.value
                    if isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "to"
                    else None
                )
                if _is_load(value) or _is_load(receiver):
                    good[name] = True
                elif not (_same(value, name) or _same(receiver, name)) or len(node.targets) > 1:
                    bad.add(name)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            bad.update(_names(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            bad.update(_names(node.target))

        def visit_For(self, node: cst.For) -> None:
            bad.update(_names(node.target))

    fn.body.visit(V())
    return set(good) - bad


def _same(node: cst.CSTNode | None, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(V())
    return found


@register
class Fp32Upcast(StatementSites, AnchoredTransform):
    """Intent: `.to(tl.float32)` on values loaded from fp16/bf16 tensors, before reductions and transcendentals,
    so sums of squares do not overflow and accumulations keep their accuracy. Undo: drop the cast, leaving math in
    the input dtype (so `x = x.to(tl.float32)` becomes `x = x`). Matched on `tl.load(...).to(tl.float32)` and on
    `name.to(tl.float32)` where the name only ever holds loaded values in that kernel; casts of computed values
    (products, accumulators) and of scalar arguments (family 26) are not this family.

    Conditions: only fp16/bf16 inputs are affected (fp32 inputs make the cast a no-op), and the low-precision math
    must fit the workload's tolerance.

    Failure: fp16 sums of squares overflow to inf; bf16 sums lose accuracy beyond tolerance; some math ops reject
    fp16/bf16 operands (e.g. sigmoid/exp needing fp32), so compilation can fail."""

    id = "fp32_upcast"
    family = 24
    tag = "M"
    cost = 2
    conditions = ("dtype_fp16", "dtype_bf16", "tolerance")
    intent = "upcasting loaded fp16/bf16 values to fp32 keeps reductions accurate and finite"
    robustness_predicate = "tolerance"

    def expert_anchors(self, module: Module):
        found = []
        for call in kernel_nodes(module, cst.Call):
            inner = cast_of(call, FP32)
            if inner is None or getattr(inner, "lpar", ()):
                continue
            fn = module.enclosing(call)
            names = module.once(fn, loaded_names)
            if _is_load(inner) or (isinstance(inner, cst.Name) and inner.value in names):
                found.append((call, {"dtype": FP32}))
        return found

    def plain_anchors(self, module: Module):
        found = []
        for node in kernel_nodes(module, cst.Call):
            if _is_load(node) and not is_cast_receiver(module, node):
                found.append((node, {}))
        for node in kernel_nodes(module, cst.Name):
            fn = module.enclosing(node)
            names = module.once(fn, loaded_names)
            if node.value in names and is_value_use(module, node) and not is_cast_receiver(module, node):
                found.append((node, {}))
        return found

    def simple(self, node: cst.Call, params: dict) -> cst.BaseExpression:
        return cast_of(node, FP32)

    def optimized(self, node: cst.BaseExpression, params: dict) -> cst.Call:
        return make_cast(node, params["dtype"])

    def default_params(self) -> dict:
        return {"dtype": FP32}
