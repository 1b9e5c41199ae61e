"""Family 25: the operand dtype of a mixed-precision `tl.dot` (the softmax weights rounded to half before P @ V).

Attention keeps P in fp32 for the softmax and multiplies it by a half-precision V. The expert form rounds P to V's
dtype for the product, `tl.dot(p.to(v.dtype), v, acc)`: both operands are half, the tensor cores take them at full
rate and the products are exact in the fp32 accumulator. The simple form raises V to fp32 instead,
`tl.dot(p, v.to(tl.float32), acc)`: an fp32 dot, which Triton runs in TF32 by default (half the half-precision
tensor-core rate on sm_90) after converting every V tile, with operand tiles twice the size in shared memory."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module
from klineage.transforms._kernel_exprs import cast_of, cast_parts, kernel_nodes, make_cast, strip_parens

FP32 = "tl.float32"
# Dtypes an operand may be rounded to for the product (written out, not read off the other operand).
HALF = ("tl.float16", "tl.bfloat16", "tl.float8e4nv", "tl.float8e5")
OTHER = "other"  # the cast names the other operand's dtype: `p.to(v.dtype)`


def _operands(call: cst.Call) -> tuple[cst.Arg, cst.Arg] | None:
    """The two operands of `tl.dot(a, b, ...)`, both positional; None for any other shape."""
    if dotted(call.func) != "tl.dot" or len(call.args) < 2:
        return None
    a, b = call.args[0], call.args[1]
    if a.keyword is not None or b.keyword is not None or a.star or b.star:
        return None
    return a, b


def _any_cast(node: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """(receiver, dtype code) of `receiver.to(dtype)`; None otherwise."""
    parts = cast_parts(node)
    return (parts[0], node_code(parts[1])) if parts is not None else None


def _rounded(call: cst.Call) -> dict | None:
    """The expert form: one operand rounded for the product, to the other's dtype or to a half dtype written out,
    while the other is no cast of its own. Params: which operand (0 or 1) and the cast (`other` or the dtype)."""
    ops = _operands(call)
    if ops is None:
        return None
    for i in (0, 1):
        cast, other = _any_cast(ops[i].value), ops[1 - i].value
        if cast is None or _any_cast(other) is not None:
            continue
        dtype = cast[1]
        if dtype == f"{node_code(strip_parens(other))}.dtype":
            return {"operand": i, "cast": OTHER}
        if dtype in HALF:
            return {"operand": i, "cast": dtype}
    return None


def _raised(call: cst.Call) -> int | None:
    """The simple form: one operand raised to fp32 (`v.to(tl.float32)`) and the other no cast. Returns the raised
    operand's position."""
    ops = _operands(call)
    if ops is None:
        return None
    for j in (0, 1):
        if cast_of(ops[j].value, FP32) is not None and _any_cast(ops[1 - j].value) is None:
            return j
    return None


def _with_operands(call: cst.Call, first: cst.BaseExpression, second: cst.BaseExpression) -> cst.Call:
    args = list(call.args)
    args[0] = args[0].with_changes(value=first)
    args[1] = args[1].with_changes(value=second)
    return call.with_changes(args=args)


@register
class DotOperandDtype(AnchoredTransform):
    """Intent: multiply half-precision tiles on the tensor cores by rounding the fp32 operand of a mixed `tl.dot`
    (the softmax weights P before P @ V) to the other operand's dtype, instead of raising the half operand to fp32.

    Sites: a `tl.dot(a, b, ...)` in a @triton.jit function with one operand cast for the product (`p.to(v.dtype)`,
    or `.to(tl.bfloat16)` and the like) and the other plain. Simplify: drop that cast and raise the other operand
    to fp32 (`tl.dot(p, v.to(tl.float32), ...)`). Params: `operand` (0 or 1, the rounded one) and `cast` (`other`
    for the other operand's dtype, or the dtype written out). Optimize: a `tl.dot` with one operand raised to fp32
    and the other plain; the raise is dropped and the plain operand cast as `cast` says.

    Conditions: the raised operand is half precision (fp16/bf16; with an fp32 one the rewrite changes nothing but
    the code) and rounding the other operand to it (about 4e-3 relative for bf16, 5e-4 for fp16) fits the
    workload's tolerance, which attention's does: its probabilities are at most 1 and summed in fp32.

    Failure: a tight tolerance fails the correctness gate; a cast to a dtype the other operand does not have
    fails to compile (tl.dot needs matching operand dtypes)."""

    id = "dot_operand_dtype"
    family = 25
    tag = "M"
    cost = 2
    conditions = ("dtype_fp16", "dtype_bf16", "tolerance")
    intent = "round the fp32 operand of a mixed tl.dot to half so the tensor cores multiply half tiles"
    label_params = ("operand", "cast")

    def expert_anchors(self, module: Module):
        return [(call, params) for call in kernel_nodes(module, cst.Call) if (params := _rounded(call)) is not None]

    def simple(self, node: cst.Call, params: dict) -> cst.Call:
        i = int(params["operand"])
        ops = [node.args[0].value, node.args[1].value]
        receiver, _ = _any_cast(ops[i])
        ops[i] = receiver
        ops[1 - i] = make_cast(ops[1 - i], FP32)
        return _with_operands(node, *ops)

    def plain_anchors(self, module: Module):
        return [(call, {"raised": j}) for call in kernel_nodes(module, cst.Call) if (j := _raised(call)) is not None]

    def optimized(self, node: cst.Call, params: dict) -> cst.Call:
        j = int(params["raised"])
        cast = params["cast"]
        if cast != OTHER and cast not in HALF:
            raise ValueError(f"dot_operand_dtype: unknown cast {cast!r}")
        ops = [node.args[0].value, node.args[1].value]
        ops[j] = cast_of(ops[j], FP32)
        dtype = f"{node_code(strip_parens(ops[j]))}.dtype" if cast == OTHER else cast
        ops[1 - j] = make_cast(ops[1 - j], dtype)
        return _with_operands(node, *ops)

    def default_params(self) -> dict:
        return {"cast": OTHER}
