"""Family 25: tl.dot input precision (tf32 vs ieee fp32)."""

from __future__ import annotations

import ast

import libcst as cst

from klineage.transform import dotted, kwarg, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module
from klineage.transforms._kernel_exprs import kernel_nodes

FAST = ("tf32", "tf32x3")  # input_precision values below ieee


def _literal(node: cst.BaseExpression):
    try:
        return ast.literal_eval(node_code(node))
    except (ValueError, SyntaxError):
        return None  # a constexpr name (autotuned precision) or anything else: not matched


@register
class DotPrecision(AnchoredTransform):
    """Intent: let fp32 `tl.dot` run on tensor cores in TF32 (`allow_tf32=True`, `input_precision="tf32"` or
    `"tf32x3"`). Undo: move toward the precise setting, `input_precision="ieee"` in the same argument position.
    Only explicit literal settings are matched; a bare `tl.dot(a, b)` is left alone (its precision is Triton's
    default, tf32 for fp32 operands) and so is a precision passed as a constexpr name.

    Conditions: the operands are float32 (the setting is ignored or rejected for other dtypes) and the TF32
    rounding of the inputs (about 1e-3 relative error; tf32x3 about fp32) fits the workload's tolerance.

    Failure: with a tight tolerance the tf32 result fails the check; ieee instead of tf32 is only slower."""

    id = "dot_precision"
    family = 25
    tag = "M"
    cost = 1
    conditions = ("dtype_fp32", "tolerance")
    intent = "tf32 input precision runs fp32 dots on tensor cores"
    forward_rank = 3

    def expert_anchors(self, module: Module):
        found = []
        for call in kernel_nodes(module, cst.Call):
            if dotted(call.func) != "tl.dot":
                continue
            tf32, precision = kwarg(call, "allow_tf32"), kwarg(call, "input_precision")
            if tf32 is not None and precision is None and node_code(tf32.value) == "True":
                found.append((call, {"kwarg": "allow_tf32", "value": "True"}))
            elif precision is not None and tf32 is None and _literal(precision.value) in FAST:
                found.append((call, {"kwarg": "input_precision", "value": node_code(precision.value)}))
        return found

    def plain_anchors(self, module: Module):
        return [
            (call, {})
            for call in kernel_nodes(module, cst.Call)
            if dotted(call.func) == "tl.dot"
            and kwarg(call, "allow_tf32") is None
            and (p := kwarg(call, "input_precision")) is not None
            and _literal(p.value) == "ieee"
        ]

    def simple(self, node: cst.Call, params: dict) -> cst.Call:
        return _replace(node, params["kwarg"], "input_precision", '"ieee"')

    def optimized(self, node: cst.Call, params: dict) -> cst.Call:
        if params["kwarg"] not in ("allow_tf32", "input_precision"):
            raise ValueError(f"dot_precision: unknown keyword {params['kwarg']!r}")
        return _replace(node, "input_precision", params["kwarg"], params["value"])

    def default_params(self) -> dict:
        return {"kwarg": "input_precision", "value": '"tf32"'}


def _replace(call: cst.Call, old: str, new: str, value: str) -> cst.Call:
    """Swap keyword argument `old` for `new=value` in place, keeping its `=` spacing and comma."""
    args = [
        a.with_changes(keyword=cst.Name(new), value=cst.parse_expression(value))
        if a.keyword is not None and a.keyword.value == old
        else a
        for a in call.args
    ]
    return call.with_changes(args=args)
