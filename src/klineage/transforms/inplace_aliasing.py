"""Family 22: in-place writes / buffer aliasing (host side)."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    calls_to,
    kernel_param_for,
    launches,
    names_in,
)

ALLOCATORS = ("torch.empty_like", "torch.zeros_like")


def _alloc_of(expr: cst.BaseExpression) -> str | None:
    """`B` for `torch.empty_like(B)` / `torch.zeros_like(B)` (one positional argument), else None."""
    if (
        isinstance(expr, cst.Call)
        and dotted(expr.func) in ALLOCATORS
        and len(expr.args) == 1
        and expr.args[0].keyword is None
        and isinstance(expr.args[0].value, cst.Name)
    ):
        return expr.args[0].value.value
    return None


def _pointer_params(kernel: cst.FunctionDef, op: str) -> set[str]:
    """Names used in the pointer argument of the kernel's `tl.load` / `tl.store` calls."""
    return set().union(*(names_in(c.args[0].value) for c in calls_to(kernel, op) if c.args))


def _launched_together(module: Module, assign: cst.Assign, out: str, src: str) -> bool:
    """After the assignment, in the same function, one launch of a kernel defined in this module passes `out` to a
    parameter the kernel stores through and `src` to one it loads through."""
    fn = module.enclosing(assign)
    if fn is None:
        return False
    kernels = module.kernels()
    line = module.line(assign)
    for call in launches(fn):
        kernel = kernels.get(call.func.value.value)
        if kernel is None or module.line(call) <= line:
            continue
        bound = {a.value.value: kernel_param_for(kernel, call, a) for a in call.args if isinstance(a.value, cst.Name)}
        stored, loaded = _pointer_params(kernel, "tl.store"), _pointer_params(kernel, "tl.load")
        if bound.get(out) in stored and bound.get(src) in loaded:
            return True
    return False


def _simple_assign(node: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
        return node.targets[0].target.value, node.value
    return None


@register
class InplaceAliasing(AnchoredTransform):
    """Intent: write a kernel's output into an input's buffer (`dX = dY`, `dy = y if in_place else
    torch.empty_like(y)`, then both passed to one launch), saving an allocation and its memory traffic.

    Conditions: no output aliases an input in a way the program can observe: nothing reads the aliased input
    after the kernel has overwritten it (within the kernel, every element is read before it is written, by the
    same program), and the caller does not reuse the buffer (Liger: Gemma2 reuses dY across residual norms, so
    its RMSNorm must run with in_place=False; calling a CE backward twice is also unsafe).

    Failure: the simplified program allocates a fresh output (`torch.empty_like`), which is always correct. The
    optimized one, where the caller or a later kernel still needs the input, silently computes from
    overwritten data: wrong gradients, or a second launch that differs from the first. A kernel whose programs
    read elements that other programs have already overwritten races.

    Sites: an assignment `A = B` or `A = B if flag else torch.empty_like(B)` (either order, zeros_like too) in
    host code, where A and B are then passed to the same kernel launch. Simplify: `A = torch.empty_like(B)`
    (the allocating branch of a conditional is kept as written). Params: `value` (the expert's right-hand side)
    and `input` (B). Optimize: an assignment `A = torch.empty_like(B)` followed by a launch taking A and B; it
    puts back `value` (by default plain `B`)."""

    id = "inplace_aliasing"
    family = 22
    tag = "S"
    cost = 4
    conditions = ("no_aliasing",)
    intent = "store the output into an input's buffer instead of allocating a new one"
    forward_rank = 4

    def expert_anchors(self, module: Module):
        found = []
        for fn in module.host_functions():
            for node in _assigns(fn):
                out, value = _simple_assign(node)
                if isinstance(value, cst.Name):
                    src, alloc = value.value, None
                elif isinstance(value, cst.IfExp):
                    pair = [(value.body, value.orelse), (value.orelse, value.body)]
                    hit = [(a.value, b) for a, b in pair if isinstance(a, cst.Name) and _alloc_of(b) == a.value]
                    if not hit:
                        continue
                    src, alloc = hit[0]
                else:
                    continue
                if src != out and _launched_together(module, node, out, src):
                    simple = node_code(alloc) if alloc is not None else f"torch.empty_like({src})"
                    found.append((node, {"value": node_code(value), "input": src, "simple": simple}))
        return found

    def simple(self, node, params):
        return node.with_changes(value=cst.parse_expression(params["simple"]))

    def plain_anchors(self, module: Module):
        found = []
        for fn in module.host_functions():
            for node in _assigns(fn):
                out, value = _simple_assign(node)
                src = _alloc_of(value)
                if src is not None and src != out and _launched_together(module, node, out, src):
                    found.append((node, {"input": src}))
        return found

    def optimized(self, node, params):
        return node.with_changes(value=cst.parse_expression(params.get("value", params["input"])))


def _assigns(fn: cst.FunctionDef) -> list[cst.Assign]:
    found: list[cst.Assign] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if _simple_assign(node) is not None:
                found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn  # nested functions are visited on their own

    fn.visit(V())
    return found
