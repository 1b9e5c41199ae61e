"""Family 27: 64-bit offset arithmetic (`.to(tl.int64)` on program ids and index values)."""

from __future__ import annotations

import libcst as cst

from klineage.transform import register
from klineage.transforms._anchored import AnchoredTransform, Module
from klineage.transforms._kernel_exprs import (
    cast_of,
    int_like,
    kernel_nodes,
    make_cast,
    single_name_assign_value,
    strip_parens,
)

INT64 = "tl.int64"


@register
class Int64Offsets(AnchoredTransform):
    """Intent: `row = tl.program_id(0).to(tl.int64)` (or `offs = (start + k).to(tl.int64)`) so that
    `row * stride` and the element offsets built from it are formed in 64 bits and cannot overflow int32.
    Matched where the cast is the whole value of `name = ...` in a @triton.jit function and its operand is an
    integer index expression (names, integer literals, tl.program_id / tl.arange, + - * // %); casts of loaded
    values (`tl.load(...).to(tl.int64)`) are left alone, since the loaded dtype is unknown.

    Conditions: int32 arithmetic is safe only while the largest element offset the kernel forms is below 2**31.

    Failure: past 2**31 elements (e.g. cross-entropy logits at 8 x 4096 x 128256) the int32 product wraps: illegal
    memory access or silently wrong rows. Below it, int32 is marginally faster."""

    id = "int64_offsets"
    family = 27
    tag = "M"
    cost = 1
    conditions = ("offsets_below_2_31",)
    intent = "int64 index arithmetic keeps element offsets past 2**31 from overflowing"
    robustness_predicate = "offsets_below_2_31"

    def expert_anchors(self, module: Module):
        found = []
        for call in kernel_nodes(module, cst.Call):
            inner = cast_of(call, INT64)
            if inner is not None and int_like(strip_parens(inner)) and single_name_assign_value(module, call):
                found.append((call, {"dtype": INT64}))
        return found

    def plain_anchors(self, module: Module):
        return [
            (node, {})
            for node in kernel_nodes(module, cst.BaseExpression)
            if single_name_assign_value(module, node) and int_like(node) and not isinstance(node, cst.Integer)
        ]

    def simple(self, node: cst.Call, params: dict) -> cst.BaseExpression:
        return strip_parens(cast_of(node, INT64))

    def optimized(self, node: cst.BaseExpression, params: dict) -> cst.Call:
        return make_cast(node, params["dtype"])

    def default_params(self) -> dict:
        return {"dtype": INT64}
