"""Family 18: exp2 domain and fast reciprocal square root."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module
from klineage.transforms._kernel_exprs import (
    EXP2,
    LOG2E,
    call_with,
    is_log2e_value,
    kernel_nodes,
    log2e_names,
    strip_parens,
)

RSQRT = ("tl.rsqrt", "tl.math.rsqrt", "libdevice.rsqrt", "rsqrt")
# Where a call is an operand, `1.0 / sqrt(x)` needs parentheses to keep the same grouping.
_OPERAND_OF = (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute, cst.Subscript)


def _tl_alias(module: Module) -> str | None:
    for node in module.positions:
        if isinstance(node, cst.Import):
            for alias in node.names:
                if dotted(alias.name) == "triton.language":
                    return alias.asname.name.value if alias.asname else None
    return None


def _rsqrt_imported(module: Module) -> bool:
    """A bare `rsqrt` is Triton's only if imported from a triton module (libdevice or triton.language.math)."""
    for node in module.positions:
        if isinstance(node, cst.ImportFrom) and node.module is not None and dotted(node.module).startswith("triton"):
            if not isinstance(node.names, cst.ImportStar) and any(
                dotted(a.name) == "rsqrt" and a.asname is None for a in node.names
            ):
                return True
    return False


def _one_arg(call: cst.Call) -> cst.BaseExpression | None:
    if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0].value
    return None


@register
class FastMath(AnchoredTransform):
    """Intent: cheaper transcendental forms: `tl.exp2(x * LOG2E)` maps to the hardware ex2.approx instruction
    instead of exp's range reduction, and `rsqrt(x)` (tl / tl.math / libdevice) is one MUFU instruction instead of a
    square root and a division. Undo: `tl.exp(x)` and `1.0 / tl.sqrt(x)`. LOG2E is a literal 1.4426950408889634
    (or 1.44269504) or a module constant with that value. Folds across statements (a pre-scaled `x * LOG2E` used
    by a later exp2, as in the bundled softmax) are not local and are not matched.

    Conditions: the approximation error of ex2.approx / rsqrt.approx fits the workload's tolerance.

    Failure: results differ in the last bits; with a tight tolerance (or fp32 references compared bit-exactly)
    the check fails. Mixing units across kernels (log2 vs ln statistics) would give wrong gradients, which is why
    only the local form is rewritten."""

    id = "fast_math"
    family = 18
    tag = "M"
    cost = 1
    conditions = ("tolerance",)
    intent = "exp2 with folded LOG2E and rsqrt map to fast hardware instructions"
    label_params = ("kind", "order", "parens")
    forward_rank = 3

    def expert_anchors(self, module: Module):
        names, tl = log2e_names(module), _tl_alias(module)
        rsqrt = set(RSQRT) - ({"rsqrt"} if not _rsqrt_imported(module) else set())

        def is_log2e(node):
            return (isinstance(node, cst.Name) and node.value in names) or is_log2e_value(node)

        found = []
        for call in kernel_nodes(module, cst.Call):
            fn, arg = dotted(call.func), _one_arg(call)
            if arg is None:
                continue
            if fn in EXP2 and isinstance(arg, cst.BinaryOperation) and isinstance(arg.operator, cst.Multiply):
                if arg.lpar:
                    continue
                for order, scale, x in (("x*c", arg.right, arg.left), ("c*x", arg.left, arg.right)):
                    if is_log2e(scale) and not is_log2e(x):
                        found.append(
                            (
                                call,
                                {
                                    "kind": "exp2",
                                    "fn": fn,
                                    "scale": node_code(scale),
                                    "order": order,
                                    "parens": "yes" if getattr(x, "lpar", ()) else "no",
                                },
                            )
                        )
                        break
            elif fn in rsqrt and tl == "tl":
                parens = isinstance(module.parents.get(call), _OPERAND_OF)
                found.append((call, {"kind": "rsqrt", "fn": fn, "parens": "yes" if parens else "no"}))
        return found

    def plain_anchors(self, module: Module):
        if _tl_alias(module) != "tl":
            return []
        found = []
        for node in kernel_nodes(module, cst.Call):
            if dotted(node.func) in EXP2.values() and _one_arg(node) is not None:
                found.append((node, {"form": "exp"}))
        for node in kernel_nodes(module, cst.BinaryOperation):
            right = node.right
            if (
                isinstance(node.operator, cst.Divide)
                and isinstance(node.left, cst.Float | cst.Integer)
                and float(node.left.value) == 1.0
                and isinstance(right, cst.Call)
                and dotted(right.func) in ("tl.sqrt", "tl.math.sqrt")
                and _one_arg(right) is not None
            ):
                found.append((node, {"form": "sqrt"}))
        return found

    def simple(self, node: cst.Call, params: dict) -> cst.BaseExpression:
        arg = _one_arg(node)
        if params["kind"] == "exp2":
            x = arg.left if params["order"] == "x*c" else arg.right
            return call_with(EXP2[params["fn"]], strip_parens(x))
        space = cst.SimpleWhitespace(" ")
        divide = cst.Divide(whitespace_before=space, whitespace_after=space)
        recip = cst.BinaryOperation(left=cst.Float("1.0"), operator=divide, right=call_with("tl.sqrt", arg))
        if params["parens"] == "yes":
            recip = recip.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return recip

    def optimized(self, node: cst.CSTNode, params: dict) -> cst.BaseExpression:
        # Without an expert's parameters (a preview) the defaults are the usual forms: x * LOG2E and tl.rsqrt.
        kind = params.get("kind") or {"exp": "exp2", "sqrt": "rsqrt"}[params["form"]]
        if params["form"] == "exp":
            if kind != "exp2":
                raise ValueError("fast_math: an exp site takes exp2 parameters")
            x, order = _one_arg(node), params.get("order", "x*c")
            if params.get("parens") == "yes" or _needs_parens(x, order):
                x = x if x.lpar else x.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            scale = cst.parse_expression(params.get("scale", repr(LOG2E)))
            left, right = (x, scale) if order == "x*c" else (scale, x)
            op = cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" "))
            return call_with(dotted(node.func) + "2", cst.BinaryOperation(left=left, operator=op, right=right))
        fn = params.get("fn", "tl.rsqrt")
        if kind != "rsqrt" or fn not in RSQRT:  # an exp2 skill says nothing about a square root
            raise ValueError("fast_math: a 1/sqrt site takes rsqrt parameters")
        return call_with(fn, _one_arg(node.right))


def _needs_parens(x: cst.BaseExpression, order: str) -> bool:
    """Whether `x` must be parenthesized as an operand of `*` (on the left for x*c, on the right for c*x)."""
    if isinstance(x, cst.BooleanOperation | cst.Comparison | cst.IfExp | cst.Lambda):
        return True
    if isinstance(x, cst.BinaryOperation):
        tight = (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply, cst.Power)
        return not isinstance(x.operator, tight) or (order == "c*x" and not isinstance(x.operator, cst.Power))
    return False
